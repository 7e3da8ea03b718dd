package main

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"maunium.net/go/mautrix/id"
)

// stopLisa stops p with SIGTERM and checks it exits 0.
func (e *e2e) stopLisa(p *lisaProc) {
	e.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		e.t.Fatal(err)
	}
	if ws := p.wait(e.t); ws.ExitStatus() != 0 {
		e.t.Fatalf("SIGTERM exit status %d; logs:\n%s", ws.ExitStatus(), p.text())
	}
}

// copyTree copies the directory src to dst (which must not exist), file
// by file: a cold, file-level copy of a stopped Lisa's data dir.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm())
		case !info.Mode().IsRegular():
			return nil // the admin socket: not data
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, info.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// askAndAwait mentions Lisa n times in room, each after the previous one
// was answered, and returns the questions.
func (e *e2e) askAndAwait(room id.RoomID, n int, what string) []id.EventID {
	e.t.Helper()
	var out []id.EventID
	for i := range n {
		q := e.mention(room, what+" question "+string(rune('A'+i)))
		e.awaitReply(room, q)
		out = append(out, q)
	}
	return out
}

// TestColdCopyOlderThanTheRoomNeverAnswersTwice puts back a data dir that
// is older than the room — a cold file-level copy, as a restored backup,
// a rolled-back VM snapshot or a restored file system would — after the
// homeserver restarted while Lisa was down: 3 questions answered before
// the copy, 3 after it, 2 asked while she was stopped. She must find her
// replies to the 3 she answered after the copy (her ledger does not know
// them) and answer only the 2 new ones: 8 questions, 8 replies. Before
// #38 she answered the 3 a second time.
func TestColdCopyOlderThanTheRoomNeverAnswersTwice(t *testing.T) {
	e := newE2E(t, 1)
	room := e.allowed[0]
	data := filepath.Join(e.dir, "data")
	p := e.start()
	e.awaitLog(p, "sync baseline recorded")
	before := e.askAndAwait(room, 3, "before the copy:")
	e.stopLisa(p)

	backup := filepath.Join(e.dir, "cold-copy")
	copyTree(t, data, backup)

	p = e.start()
	after := e.askAndAwait(room, 3, "after the copy:")
	e.stopLisa(p)
	down := []id.EventID{e.mention(room, "asked while she is down, 1"), e.mention(room, "asked while she is down, 2")}
	if err := e.hs.Restart(e.ctx); err != nil {
		t.Fatal(err)
	}

	// The copy is put back, whole.
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	copyTree(t, backup, data)
	p = e.start()
	for _, q := range down {
		e.awaitReply(room, q)
	}
	sentinel := e.settle(room)
	want := map[id.EventID]int{sentinel: 1}
	for _, q := range append(append(append([]id.EventID(nil), before...), after...), down...) {
		want[q] = 1
	}
	e.expectReplies(room, want)
	if len(want) != 9 {
		t.Fatalf("%d distinct questions, want 8 and the sentinel", len(want))
	}
}
