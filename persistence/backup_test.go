package persistence_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/persistence"
)

func openBadger(t *testing.T, dir string) *persistence.Badger {
	t.Helper()
	s, err := persistence.OpenBadger(dir, persistence.BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// commitN commits sync answer n: a cursor naming n and one candidate,
// in one transaction.
func commitN(t testing.TB, s persistence.Store, n int) {
	t.Helper()
	if err := commit(s, n); err != nil {
		t.Fatal(err)
	}
}

func commit(s persistence.Store, n int) error {
	cur := &roompb.SyncCursor{NextBatch: fmt.Sprintf("s%d", n), BaselineDone: true}
	c := &roompb.Candidate{RoomId: "!a:hs", EventId: fmt.Sprintf("$q%d", n), Sender: "@u:hs", Trigger: "mention", Body: "hi"}
	_, err := s.CommitSync(cur, []*roompb.Candidate{c})
	return err
}

// A backup taken while the store is written is one moment of it: the
// restored cursor and inbox belong to the same commit, however many
// commits ran during the backup. The restore keeps the ledger of Lisa's
// replies and drops the clean-stop mark.
func TestBackupWhileWritingRestoresOneMoment(t *testing.T) {
	src := openBadger(t, t.TempDir())
	defer src.Close()
	commitN(t, src, 0)
	if err := src.RecordBotEvent("!a:hs", "$r0", "$q0"); err != nil {
		t.Fatal(err)
	}
	if err := src.MarkCleanStop(); err != nil {
		t.Fatal(err)
	}
	var (
		stop  atomic.Bool
		wg    sync.WaitGroup
		wrote atomic.Int64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1; !stop.Load(); n++ {
			if err := commit(src, n); err != nil {
				t.Error(err)
				return
			}
			wrote.Add(1)
		}
	}()
	for wrote.Load() < 50 {
		// Let the writer get going before the snapshot.
		runtime.Gosched()
	}
	path := filepath.Join(t.TempDir(), "lisa.backup")
	info, err := src.BackupTo(path)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != info.Bytes || st.Mode().Perm() != 0o600 {
		t.Fatalf("backup file %v (%v), info %+v", st, err, info)
	}
	if _, err := src.BackupTo(path); err == nil {
		t.Fatal("a backup overwrote an existing file")
	}

	dst := filepath.Join(t.TempDir(), "restored")
	if _, err := persistence.RestoreBackup(dst, path, persistence.BadgerOptions{}); err != nil {
		t.Fatal(err)
	}
	r := openBadger(t, dst)
	defer r.Close()
	cur, err := r.Cursor()
	if err != nil {
		t.Fatal(err)
	}
	var last int
	if _, err := fmt.Sscanf(cur.GetNextBatch(), "s%d", &last); err != nil {
		t.Fatalf("restored cursor %q", cur.GetNextBatch())
	}
	inbox, err := r.Inbox("!a:hs")
	if err != nil {
		t.Fatal(err)
	}
	if len(inbox) != last+1 {
		t.Fatalf("restored cursor s%d with %d inbox entries: not one moment", last, len(inbox))
	}
	if last < 50 || int64(last) > wrote.Load() {
		t.Fatalf("restored cursor s%d; %d commits were made", last, wrote.Load())
	}
	if reply, _ := r.RepliedTo("!a:hs", "$q0"); reply != "$r0" {
		t.Fatalf("the restored ledger lost Lisa's reply: %q", reply)
	}
	if clean, _ := r.TakeCleanStop(); clean {
		t.Fatal("a restored store claims a clean stop: its first start would trust its first sync")
	}
	t.Logf("backup of %d commits: %d bytes in %v", last+1, info.Bytes, info.Took)
}

// A restore refuses a data dir that is not empty, and any file that is
// not a whole backup — another file, one cut short anywhere, one with a
// byte changed — before it writes anything.
func TestRestoreRefusesWhatIsNotWhole(t *testing.T) {
	src := openBadger(t, t.TempDir())
	for n := range 20 {
		commitN(t, src, n)
	}
	path := filepath.Join(t.TempDir(), "lisa.backup")
	if _, err := src.BackupTo(path); err != nil {
		t.Fatal(err)
	}
	src.Close()
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := persistence.CheckBackup(path); err != nil {
		t.Fatalf("a whole backup fails its check: %v", err)
	}

	busy := t.TempDir()
	if err := os.WriteFile(filepath.Join(busy, "MANIFEST"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := persistence.RestoreBackup(busy, path, persistence.BadgerOptions{}); !errors.Is(err, persistence.ErrDataDirInUse) {
		t.Fatalf("restore into a non-empty dir: %v", err)
	}

	flipped := append([]byte(nil), whole...)
	flipped[len(flipped)/2] ^= 1
	cases := map[string][]byte{
		"another file":     []byte("hello, this is not a backup at all, though it is long enough to have a trailer"),
		"empty":            nil,
		"one byte changed": flipped,
	}
	for _, cut := range []int{len(whole) - 1, len(whole) - 8, len(whole) - 48, len(whole) / 2, 20} {
		cases[fmt.Sprintf("cut to %d of %d bytes", cut, len(whole))] = whole[:cut]
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "bad.backup")
			if err := os.WriteFile(bad, data, 0o600); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), "restored")
			_, err := persistence.RestoreBackup(dst, bad, persistence.BadgerOptions{})
			if !errors.Is(err, persistence.ErrNotBackup) {
				t.Fatalf("restore of %s: %v, want ErrNotBackup", name, err)
			}
			if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused restore left %s behind (%v)", dst, err)
			}
		})
	}
}

// TestRestoreRefusesANewerFormat: a backup written by a build of a newer
// data-dir format is not put in place (this build would refuse the dir
// at every start); the target is left empty.
func TestRestoreRefusesANewerFormat(t *testing.T) {
	dir := t.TempDir()
	src := openBadger(t, dir)
	commitN(t, src, 1)
	src.Close()
	if err := persistence.SetFormatForTest(dir, persistence.FormatVersion+1); err != nil {
		t.Fatal(err)
	}
	// The newer build writes its backup; this one only reads the stream,
	// so a raw Badger backup of that dir stands in for it.
	path := filepath.Join(t.TempDir(), "lisa.backup")
	if err := persistence.BackupRawForTest(dir, path); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "restored")
	_, err := persistence.RestoreBackup(target, path, persistence.BadgerOptions{})
	want := fmt.Sprintf("has format %d; this lisa reads formats up to %d", persistence.FormatVersion+1, persistence.FormatVersion)
	if !errors.Is(err, persistence.ErrNewerFormat) || !strings.Contains(err.Error(), want) {
		t.Fatalf("restore of a newer format: %v, want ErrNewerFormat naming %q", err, want)
	}
	if entries, err := os.ReadDir(target); err != nil || len(entries) != 0 {
		t.Fatalf("the target holds %d entries (%v) after the refusal", len(entries), err)
	}
}

// TestSwapSessionFingerprint: each swap returns the fingerprint of the
// process before, across a reopen.
func TestSwapSessionFingerprint(t *testing.T) {
	dir := t.TempDir()
	s := openBadger(t, dir)
	for i, c := range []struct{ put, prev string }{{"fp1", ""}, {"fp1", "fp1"}, {"fp2", "fp1"}} {
		if prev, err := s.SwapSessionFingerprint(c.put); err != nil || prev != c.prev {
			t.Fatalf("swap %d: %q %v, want %q", i, prev, err, c.prev)
		}
	}
	s.Close()
	s = openBadger(t, dir)
	defer s.Close()
	if prev, err := s.SwapSessionFingerprint("fp3"); err != nil || prev != "fp2" {
		t.Fatalf("after a reopen: %q %v, want fp2", prev, err)
	}
}
