package main

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/testkit/llmfake"
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
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
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
	})
}

// lisaCLI runs one lisa command in this process and returns its exit
// code, standard output and standard error.
func (e *e2e) lisaCLI(args ...string) (int, string, string) {
	e.t.Helper()
	var out, errb strings.Builder
	code := run(e.ctx, args, strings.NewReader(""), &out, &errb, os.LookupEnv)
	return code, out.String(), errb.String()
}

// TestBackupRestoreNeverAnswersTwice takes a backup with `lisa backup`
// while Lisa runs — between two answers, and while an answer is in
// flight (the model holds it) — answers 3 more questions, stops her,
// asks 2 more while she is down, restarts the homeserver, and restores
// the backup with `lisa restore` into an empty data dir: every question
// has exactly one reply on the homeserver, none twice, none lost.
func TestBackupRestoreNeverAnswersTwice(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		for _, inFlight := range []bool{false, true} {
			name := "between answers"
			if inFlight {
				name = "answer in flight"
			}
			t.Run(name, func(t *testing.T) {
				e := newE2E(t, hs, 1)
				room := e.allowed[0]
				cfg := e.writeConfig()
				data := filepath.Join(e.dir, "data")
				backup := filepath.Join(e.dir, "lisa.backup")
				p := e.start()
				e.awaitLog(p, "sync baseline recorded")
				questions := e.askAndAwait(room, 2, "before the backup:")
				var held, queued id.EventID
				gate := llmfake.NewGate()
				defer gate.Release()
				if inFlight {
					e.llm.Enqueue(llmfake.Answer("answered while the backup ran").Until(gate))
					held = e.mention(room, "the question in flight during the backup")
					if err := e.llm.WaitForInFlight(e.ctx, 1); err != nil {
						t.Fatal(err)
					}
					// Queued behind it (a room answers in order), never
					// tried when the backup is taken: the restored journal
					// (or inbox) holds it unanswered.
					accepted := strings.Count(p.text(), "invocation accepted")
					queued = e.mention(room, "the question queued during the backup")
					e.awaitCondition("the queued question accepted", func() bool {
						return strings.Count(p.text(), "invocation accepted") > accepted
					})
				} else {
					questions = append(questions, e.askAndAwait(room, 1, "last before the backup:")...)
				}
				code, out, errs := e.lisaCLI("backup", "--config", cfg, "--to", backup)
				if code != 0 {
					t.Fatalf("lisa backup: exit %d: %s %s", code, out, errs)
				}
				// The daemon logs before it answers the socket, but her
				// output reaches the test through a pipe: await the line.
				e.awaitLog(p, "backup written")
				if inFlight {
					gate.Release()
					e.awaitReply(room, held)
					e.awaitReply(room, queued)
					questions = append(questions, held, queued)
				}
				questions = append(questions, e.askAndAwait(room, 3, "after the backup:")...)
				e.stopLisa(p)
				questions = append(questions, e.mention(room, "asked while she is down, 1"), e.mention(room, "asked while she is down, 2"))
				if err := e.hs.Restart(e.ctx); err != nil {
					t.Fatal(err)
				}

				if code, _, errs := e.lisaCLI("restore", "--config", cfg, "--from", backup); code == 0 || !strings.Contains(errs, "not empty") {
					t.Fatalf("restore into the used data dir: exit %d: %s", code, errs)
				}
				if err := os.Rename(data, data+".old"); err != nil {
					t.Fatal(err)
				}
				if code, out, errs := e.lisaCLI("restore", "--config", cfg, "--from", backup); code != 0 {
					t.Fatalf("lisa restore: exit %d: %s %s", code, out, errs)
				}
				p = e.start()
				for _, q := range questions[len(questions)-2:] {
					e.awaitReply(room, q)
				}
				sentinel := e.settle(room)
				want := map[id.EventID]int{sentinel: 1}
				for _, q := range questions {
					want[q] = 1
				}
				if len(want) != len(questions)+1 {
					t.Fatalf("%d distinct questions and the sentinel, want %d", len(want), len(questions)+1)
				}
				e.expectReplies(room, want)
			})
		}
	})
}

// awaitCondition polls ok until it holds, within a minute.
func (e *e2e) awaitCondition(what string, ok func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			logs := ""
			if e.proc != nil {
				logs = e.proc.text()
			}
			e.t.Fatalf("timed out waiting for %s; logs:\n%s", what, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
