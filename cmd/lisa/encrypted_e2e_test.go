package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// encryptedRoom creates a room with encryption turned on from the start
// (as Element does for private rooms), invites Lisa and joins her.
func (e *e2e) encryptedRoom() id.RoomID {
	e.t.Helper()
	r, err := e.human.CreateRoom(e.ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Name: "secret room",
		Invite: []id.UserID{id.UserID(e.bot.UserID)},
		InitialState: []*event.Event{{Type: event.StateEncryption, Content: event.Content{
			Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}}}}})
	if err != nil {
		e.t.Fatal(err)
	}
	botCli, _ := mautrix.NewClient(e.hs.URL(), id.UserID(e.bot.UserID), e.bot.AccessToken)
	if _, err := botCli.JoinRoomByID(e.ctx, r.RoomID); err != nil {
		e.t.Fatal(err)
	}
	return r.RoomID
}

// logRecords returns Lisa's log records with message msg.
func (p *lisaProc) logRecords(msg string) []map[string]any {
	var out []map[string]any
	for line := range strings.SplitSeq(p.text(), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil && r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// awaitRecord waits until Lisa has logged msg, whenever she did (awaitLog
// only sees messages it has not passed over), and returns its records.
func (e *e2e) awaitRecord(p *lisaProc, msg string) []map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if recs := p.logRecords(msg); len(recs) > 0 {
			return recs
		}
		select {
		case <-p.done:
			e.t.Fatalf("lisa exited while waiting for %q; logs:\n%s", msg, p.text())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for log %q; logs:\n%s", msg, p.text())
		}
	}
}

// TestEncryptedRoomIsReported (#17 item 9): an allowed room with
// encryption turned on is named at start in one error line ("room X is
// encrypted; Lisa cannot read it", X as configured) and by `lisa health`,
// which is degraded (exit 1) with that line as a reason, while Lisa goes
// on answering in the other allowed rooms.
func TestEncryptedRoomIsReported(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		plain := e.allowed[0]
		secret := e.encryptedRoom()
		e.allowed = append(e.allowed, secret)
		p := e.start()
		e.awaitLog(p, "sync baseline recorded")

		line := "room " + string(secret) + " is encrypted; Lisa cannot read it"
		recs := e.awaitRecord(p, line)
		if len(recs) != 1 || recs[0]["level"] != "ERROR" {
			t.Fatalf("error line for the encrypted room: %v", recs)
		}
		if strings.Contains(p.text(), "room "+string(plain)+" is encrypted") {
			t.Fatalf("the plain room was reported as encrypted:\n%s", p.text())
		}
		e.awaitRecord(p, "allowed rooms checked for encryption")

		var out bytes.Buffer
		code := run(context.Background(), []string{"health", "--config", filepath.Join(e.dir, "lisa.toml")},
			strings.NewReader(""), &out, &bytes.Buffer{}, lookupFrom(nil))
		var r struct {
			Status         string   `json:"status"`
			Reasons        []string `json:"reasons"`
			EncryptedRooms []string `json:"encrypted_rooms"`
		}
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("health output %q: %v", out.String(), err)
		}
		if code != 1 || r.Status != "degraded" || !slices.Contains(r.Reasons, line) ||
			!slices.Equal(r.EncryptedRooms, []string{string(secret)}) {
			t.Fatalf("lisa health exit %d: %s", code, out.String())
		}

		// Lisa keeps serving the other room.
		ev := e.mention(plain, "are you still here?")
		e.awaitReply(plain, ev)
	})
}
