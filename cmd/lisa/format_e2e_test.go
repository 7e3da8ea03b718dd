package main

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/persistence"
)

// setDataDirFormat records format in the stopped Lisa's data dir, as a
// build of that format would (the record is key 'f': be64(format), see
// persistence/format.go).
func setDataDirFormat(t *testing.T, dir string, format int) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(txn *badger.Txn) error {
		return txn.Set([]byte{'f'}, binary.BigEndian.AppendUint64(nil, uint64(format)))
	}); err != nil {
		t.Fatal(err)
	}
}

// TestNewerDataDirFormatIsRefusedAtStart: Lisa answers a question, is
// stopped, and her data dir is marked as written by a newer build (a
// rollback to an older binary after an upgrade). The older binary exits
// at start with one log line naming both formats, sends nothing, and
// leaves the format as it was. Back on a build that reads the format,
// nothing old is answered again and the question asked meanwhile is
// answered once.
func TestNewerDataDirFormatIsRefusedAtStart(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		room := e.allowed[0]
		data := filepath.Join(e.dir, "data")
		p := e.start()
		e.awaitLog(p, "sync baseline recorded")
		first := e.askAndAwait(room, 1, "before the rollback:")
		e.stopLisa(p)

		newer := persistence.FormatVersion + 1
		setDataDirFormat(t, data, newer)
		waiting := e.mention(room, "asked while the data dir is of a newer format")
		p = e.start()
		if ws := p.wait(t); ws.ExitStatus() == 0 {
			t.Fatalf("lisa started on a data dir of format %d; logs:\n%s", newer, p.text())
		}
		want := fmt.Sprintf("has format %d; this lisa reads formats up to %d", newer, persistence.FormatVersion)
		var refusals []string
		for _, line := range strings.Split(p.text(), "\n") {
			if strings.Contains(line, want) {
				refusals = append(refusals, line)
			}
		}
		if len(refusals) != 1 || !strings.Contains(refusals[0], "cannot start") {
			t.Fatalf("want one \"cannot start\" line naming both formats (%q); logs:\n%s", want, p.text())
		}
		if n := e.replies(room)[waiting]; n != 0 {
			t.Fatalf("the refusing build replied %d times", n)
		}
		s, err := persistence.OpenBadger(data, persistence.BadgerOptions{})
		if err == nil {
			s.Close()
			t.Fatalf("the refusal rewrote the data dir's format")
		}

		setDataDirFormat(t, data, persistence.FormatVersion)
		p = e.start()
		e.awaitReply(room, waiting)
		sentinel := e.settle(room)
		e.stopLisa(p)
		e.expectReplies(room, map[id.EventID]int{first[0]: 1, waiting: 1, sentinel: 1})
	})
}
