package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// TestRoomEncryptedWhileRunning (#17 item 9): a member turns encryption on
// in an allowed room while Lisa runs. Lisa sees it in her sync, logs the
// operator's error line once and `lisa health` turns degraded; a later
// mention there (encrypted, unreadable) is not answered, and the sync goes
// on for everything else.
func TestRoomEncryptedWhileRunning(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 2)
		room, other := e.allowed[0], e.allowed[1]
		p := e.start()
		e.awaitLog(p, "sync baseline recorded")
		e.awaitRecord(p, "allowed rooms checked for encryption")

		if _, err := e.human.SendStateEvent(e.ctx, room, event.StateEncryption, "",
			&event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}); err != nil {
			t.Fatal(err)
		}
		line := "room " + string(room) + " is encrypted; Lisa cannot read it"
		recs := e.awaitRecord(p, line)
		if recs[0]["level"] != "ERROR" || recs[0]["found_by"] != "sync" {
			t.Fatalf("error line: %v", recs)
		}

		var out bytes.Buffer
		code := run(context.Background(), []string{"health", "--config", filepath.Join(e.dir, "lisa.toml")},
			strings.NewReader(""), &out, &bytes.Buffer{}, lookupFrom(nil))
		var r struct {
			Status         string   `json:"status"`
			EncryptedRooms []string `json:"encrypted_rooms"`
		}
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("health output %q: %v", out.String(), err)
		}
		if code != 1 || r.Status != "degraded" || !slices.Equal(r.EncryptedRooms, []string{string(room)}) {
			t.Fatalf("lisa health exit %d: %s", code, out.String())
		}

		ev := e.mention(other, "still answering elsewhere?")
		e.awaitReply(other, ev)
		if n := len(p.logRecords(line)); n != 1 {
			t.Fatalf("the error line was logged %d times", n)
		}
	})
}
