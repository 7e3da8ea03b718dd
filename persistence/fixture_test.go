package persistence_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/persistence"
)

// update regenerates the fixture of the current format:
//
//	go test ./persistence/ -run TestWriteFormatFixture -update
//
// writes persistence/testdata/format<N>.tar.gz, N being
// persistence.FormatVersion. The fixtures of older formats were written
// by the builds that used them and are never regenerated.
var update = flag.Bool("update", false, "write the data-dir fixture of the current format to testdata/")

// The fixture's content, the same in every format.
const (
	fxRoom     = "!fixture:lisa.test"
	fxActor    = "room/!fixture:lisa.test"
	fxAnswered = "$answered"
	fxPending  = "$pending"
	fxReply    = "$reply"
	fxDay      = "2026-12-01"
	fxBatch    = "s42_fixture"
)

// writeFixture fills a store as a running Lisa would: a sync cursor, a
// room journal with an answered invocation and its snapshot, a routed
// mention still in the inbox, Lisa's reply as a bot event, a usage
// record, a budget notice and a clean-stop mark.
func writeFixture(t *testing.T, s *persistence.Badger) {
	t.Helper()
	answered := &roompb.Candidate{RoomId: fxRoom, EventId: fxAnswered, Sender: "@alice:lisa.test", OriginTsMs: 1764547200000, Body: "lisa: hello?"}
	pending := &roompb.Candidate{RoomId: fxRoom, EventId: fxPending, Sender: "@bob:lisa.test", OriginTsMs: 1764547260000, Body: "lisa: and you?"}
	must(t, commitSync(s, &roompb.SyncCursor{NextBatch: "s41_fixture", BaselineDone: true}, answered))
	events := []proto.Message{
		&roompb.InvocationQueued{Candidate: answered, QueuedAtMs: 1764547201000},
		&roompb.InvocationStarted{EventId: fxAnswered, Attempt: 1, StartedAtMs: 1764547202000},
		&roompb.ReplyReady{EventId: fxAnswered, TxnId: "txn1", Content: []byte(`{"msgtype":"m.text","body":"hi"}`), ReadyAtMs: 1764547203000},
		&roompb.ReplySent{EventId: fxAnswered, ReplyEventId: fxReply, SentAtMs: 1764547204000},
	}
	for i, ev := range events {
		must(t, s.AppendEvent(fxActor, uint64(i+1), ev))
	}
	must(t, s.SaveSnapshot(fxActor, 5, &roompb.RoomSnapshot{NextEventIndex: 5, Recent: []string{fxAnswered}, RecentReplies: []string{fxReply}, Answered: 1, LastReplyAtMs: 1764547204000}))
	must(t, s.RecordBotEvent(fxRoom, fxReply, fxAnswered))
	must(t, commitSync(s, &roompb.SyncCursor{NextBatch: fxBatch, BaselineDone: true, LastEventIds: map[string]string{fxRoom: fxPending}}, pending))
	must(t, s.RecordUsage(persistence.UsageRecord{Day: fxDay, Room: fxRoom, ID: "p1-1", Event: fxAnswered, Attempt: 1, PromptTokens: 1200, CompletionTokens: 34, AtMs: 1764547203000}))
	if ok, err := s.BudgetNotice(fxDay, fxRoom, fxAnswered); err != nil || !ok {
		t.Fatalf("budget notice: %v %v", ok, err)
	}
	must(t, s.Sync())
	must(t, s.MarkCleanStop())
}

func commitSync(s *persistence.Badger, cur *roompb.SyncCursor, c *roompb.Candidate) error {
	_, err := s.CommitSync(cur, []*roompb.Candidate{c})
	return err
}

// checkFixture checks that every keyspace of the fixture reads back.
func checkFixture(t *testing.T, s *persistence.Badger) {
	t.Helper()
	cur, err := s.Cursor()
	if err != nil || cur.GetNextBatch() != fxBatch || !cur.GetBaselineDone() || cur.GetLastEventIds()[fxRoom] != fxPending {
		t.Fatalf("cursor: %v %v", cur, err)
	}
	var kinds []string
	must(t, s.Events(fxActor, 1, 0, func(_ uint64, ev proto.Message) error {
		kinds = append(kinds, string(proto.MessageName(ev).Name()))
		return nil
	}))
	if got := strings.Join(kinds, ","); got != "InvocationQueued,InvocationStarted,ReplyReady,ReplySent" {
		t.Fatalf("journal: %s", got)
	}
	snap, idx, ok, err := s.LatestSnapshot(fxActor)
	if rs, _ := snap.(*roompb.RoomSnapshot); err != nil || !ok || idx != 5 || rs.GetAnswered() != 1 || rs.GetRecentReplies()[0] != fxReply {
		t.Fatalf("snapshot: %v %d %v %v", snap, idx, ok, err)
	}
	inbox, err := s.Inbox(fxRoom)
	if err != nil || len(inbox) != 1 || inbox[0].GetEventId() != fxPending || inbox[0].GetInboxSeq() != 2 {
		t.Fatalf("inbox: %v %v", inbox, err)
	}
	for _, ev := range []string{fxAnswered, fxPending} {
		if ok, err := s.Routed(fxRoom, ev); err != nil || !ok {
			t.Fatalf("routed %s: %v %v", ev, ok, err)
		}
	}
	// Routed events are not routed again; a new one is, after the old.
	acc, err := s.CommitSync(&roompb.SyncCursor{NextBatch: fxBatch, BaselineDone: true, LastEventIds: map[string]string{fxRoom: fxPending}},
		[]*roompb.Candidate{{RoomId: fxRoom, EventId: fxAnswered}, {RoomId: fxRoom, EventId: fxPending}})
	if err != nil || len(acc) != 0 {
		t.Fatalf("routed again: %v %v", acc, err)
	}
	if ok, err := s.IsBotEvent(fxRoom, fxReply); err != nil || !ok {
		t.Fatalf("bot event: %v %v", ok, err)
	}
	// Every format answers which reply answered a question (format 1 by
	// the migration's index).
	if reply, err := s.RepliedTo(fxRoom, fxAnswered); err != nil || reply != fxReply {
		t.Fatalf("replied to: %q %v", reply, err)
	}
	var usage []persistence.UsageRecord
	must(t, s.Usage(fxDay, func(r persistence.UsageRecord) error { usage = append(usage, r); return nil }))
	if len(usage) != 1 || usage[0].Event != fxAnswered || usage[0].PromptTokens != 1200 || usage[0].CompletionTokens != 34 {
		t.Fatalf("usage: %+v", usage)
	}
	if mine, err := s.BudgetNotice(fxDay, fxRoom, "$other"); err != nil || mine {
		t.Fatalf("budget notice claimed again: %v %v", mine, err)
	}
	if clean, err := s.TakeCleanStop(); err != nil || !clean {
		t.Fatalf("clean stop: %v %v", clean, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// fixtureFormat is the format writeFixture writes: this build's.
const fixtureFormat = persistence.FormatVersion

// TestWriteFormatFixture writes a data dir of this build's format as the
// fixture is written, packs it and checks that it reads back after
// unpacking; with -update it also replaces testdata/format<N>.tar.gz.
func TestWriteFormatFixture(t *testing.T) {
	dir := t.TempDir()
	s, err := persistence.OpenBadger(dir, persistence.BadgerOptions{})
	must(t, err)
	writeFixture(t, s)
	must(t, s.Close())
	var buf bytes.Buffer
	must(t, packDir(&buf, dir))
	name := fixtureName(fixtureFormat)
	out := filepath.Join(t.TempDir(), name)
	if *update {
		out = filepath.Join("testdata", name)
	}
	must(t, os.WriteFile(out, buf.Bytes(), 0o644))
	reopened, err := persistence.OpenBadger(unpackTo(t, out), persistence.BadgerOptions{})
	must(t, err)
	defer func() { must(t, reopened.Close()) }()
	checkFixture(t, reopened)
}

func fixtureName(format int) string {
	return "format" + string(rune('0'+format)) + ".tar.gz"
}

// packDir writes dir's regular files as a gzipped tar, in name order,
// with no times or owners.
func packDir(w io.Writer, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.Name(), Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// unpackFixture unpacks testdata/<name> into a new directory.
func unpackFixture(t *testing.T, name string) string {
	t.Helper()
	return unpackTo(t, filepath.Join("testdata", name))
}

// unpackTo unpacks the packed data dir at path into a new directory.
func unpackTo(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	must(t, err)
	tr := tar.NewReader(gz)
	dir := t.TempDir()
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		must(t, err)
		if h.Name != filepath.Base(h.Name) || h.Typeflag != tar.TypeReg {
			t.Fatalf("fixture entry %q", h.Name)
		}
		b, err := io.ReadAll(tr)
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, h.Name), b, 0o644))
	}
}

// TestFormatFixtures opens a copy of every format's fixture with this
// build: every keyspace reads back, and a second open finds the same.
func TestFormatFixtures(t *testing.T) {
	for format := 1; format <= fixtureFormat; format++ {
		t.Run(fixtureName(format), func(t *testing.T) {
			dir := unpackFixture(t, fixtureName(format))
			s, err := persistence.OpenBadger(dir, persistence.BadgerOptions{})
			must(t, err)
			if s.Format() != persistence.FormatVersion {
				t.Fatalf("format %d after open, want %d", s.Format(), persistence.FormatVersion)
			}
			checkFixture(t, s)
			must(t, s.Close())
			if got, err := persistence.FormatOnDiskForTest(dir); err != nil || got != persistence.FormatVersion {
				t.Fatalf("format on disk %d %v, want %d", got, err, persistence.FormatVersion)
			}
			s, err = persistence.OpenBadger(dir, persistence.BadgerOptions{})
			must(t, err)
			defer s.Close()
			if cur, err := s.Cursor(); err != nil || cur.GetNextBatch() != fxBatch {
				t.Fatalf("cursor after a second open: %v %v", cur, err)
			}
			// Nothing old is routed again; the next mention is, once.
			old := []*roompb.Candidate{{RoomId: fxRoom, EventId: fxAnswered}, {RoomId: fxRoom, EventId: fxPending}}
			next := &roompb.Candidate{RoomId: fxRoom, EventId: "$next"}
			for i, want := range []int{1, 0} {
				acc, err := s.CommitSync(&roompb.SyncCursor{NextBatch: "s43_fixture", BaselineDone: true, LastEventIds: map[string]string{fxRoom: "$next"}}, append(old, next))
				if err != nil || len(acc) != want {
					t.Fatalf("old and the next mention, commit %d: %d routed (%v), want %d", i+1, len(acc), err, want)
				}
			}
		})
	}
}

// TestEachMigration runs each step of the migration table alone on the
// fixture of the format it starts from: the result reads back as the
// fixture, and opening it migrates nothing more than the later steps.
func TestEachMigration(t *testing.T) {
	if persistence.Migrations != persistence.FormatVersion-1 {
		t.Fatalf("%d migrations for format %d", persistence.Migrations, persistence.FormatVersion)
	}
	for from := 1; from < persistence.FormatVersion; from++ {
		t.Run(fixtureName(from), func(t *testing.T) {
			dir := unpackFixture(t, fixtureName(from))
			if got, err := persistence.FormatOnDiskForTest(dir); err != nil || got != from {
				t.Fatalf("fixture has format %d %v, want %d", got, err, from)
			}
			must(t, persistence.MigrateOnceForTest(dir, from, time.Now()))
			if got, err := persistence.FormatOnDiskForTest(dir); err != nil || got != from+1 {
				t.Fatalf("format %d %v after the step, want %d", got, err, from+1)
			}
			s, err := persistence.OpenBadger(dir, persistence.BadgerOptions{})
			must(t, err)
			defer s.Close()
			checkFixture(t, s)
		})
	}
}

// TestNewerFormatIsRefused: a data dir of a newer format fails to open
// with one line naming both formats, and is left as it was.
func TestNewerFormatIsRefused(t *testing.T) {
	dir := unpackFixture(t, fixtureName(fixtureFormat))
	newer := persistence.FormatVersion + 1
	must(t, persistence.SetFormatForTest(dir, newer))
	s, err := persistence.OpenBadger(dir, persistence.BadgerOptions{})
	if err == nil {
		s.Close()
		t.Fatal("a data dir of a newer format opened")
	}
	want := fmt.Sprintf("data dir %s has format %d; this lisa reads formats up to %d: upgrade lisa or restore a backup of the older format", dir, newer, persistence.FormatVersion)
	if !errors.Is(err, persistence.ErrNewerFormat) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %q, want ErrNewerFormat with %q", err, want)
	}
	if got, err := persistence.FormatOnDiskForTest(dir); err != nil || got != newer {
		t.Fatalf("format %d %v after the refusal, want %d", got, err, newer)
	}
	// Nothing else changed either: back at this build's format, the
	// fixture reads as written.
	must(t, persistence.SetFormatForTest(dir, persistence.FormatVersion))
	s, err = persistence.OpenBadger(dir, persistence.BadgerOptions{})
	must(t, err)
	defer s.Close()
	checkFixture(t, s)
}

// TestNewDataDirGetsTheFormat: a new store records this build's format.
func TestNewDataDirGetsTheFormat(t *testing.T) {
	dir := t.TempDir()
	s, err := persistence.OpenBadger(dir, persistence.BadgerOptions{})
	must(t, err)
	if s.Format() != persistence.FormatVersion {
		t.Fatalf("format %d", s.Format())
	}
	must(t, s.Close())
	if got, err := persistence.FormatOnDiskForTest(dir); err != nil || got != persistence.FormatVersion {
		t.Fatalf("format on disk %d %v", got, err)
	}
}
