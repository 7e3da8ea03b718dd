package crashfs_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lisabot/lisa/testkit/crashfs"
)

func mount(t *testing.T) *crashfs.FS {
	t.Helper()
	crashfs.Require(t)
	mnt, backing := t.TempDir(), t.TempDir()
	f, err := crashfs.Mount(mnt, backing)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return f
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The worst-case image holds what was fsynced and nothing else: a write
// after the last fsync is gone, a file never fsynced whose name no fsync
// committed is gone, and the names committed by an fsync of another file
// stay (ext4's journal order).
func TestImageKeepsOnlyWhatWasSynced(t *testing.T) {
	f := mount(t)
	a, err := os.Create(filepath.Join(f.Dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Write([]byte("synced ")); err != nil {
		t.Fatal(err)
	}
	b, err := os.Create(filepath.Join(f.Dir, "b")) // named before a's fsync
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Write([]byte("never synced")); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	afterSync := f.Len()
	if _, err := a.Write([]byte("lost")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.Dir, "c"), []byte("lost too"), 0o644); err != nil {
		t.Fatal(err)
	}

	img := filepath.Join(t.TempDir(), "img")
	if err := f.Image(f.Len(), img, 0, nil); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(img, "a")); string(got) != "synced " {
		t.Errorf("a = %q, want only the synced write", got)
	}
	if got := read(t, filepath.Join(img, "b")); len(got) != 0 {
		t.Errorf("b = %q, want its name (committed by a's fsync) without its data", got)
	}
	if _, err := os.Stat(filepath.Join(img, "c")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("c exists in the image although no fsync followed its creation: %v", err)
	}

	// An image cut before the fsync holds no file at all.
	early := filepath.Join(t.TempDir(), "early")
	if err := f.Image(afterSync-1, early, 0, nil); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(early); len(entries) != 0 {
		t.Errorf("image before the first fsync holds %d entries, want 0", len(entries))
	}

	// Keeping every unsynced page gives the file as written.
	all := filepath.Join(t.TempDir(), "all")
	if err := f.Image(f.Len(), all, 1, rand.New(rand.NewPCG(1, 2))); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(all, "a")); string(got) != "synced lost" {
		t.Errorf("a with every page kept = %q", got)
	}
}

// Pages written through a shared mapping reach the recorder when they are
// written back, and msync makes them stable like fsync: the way Badger
// writes its logs.
func TestMappedWritesAreRecorded(t *testing.T) {
	f := mount(t)
	path := filepath.Join(f.Dir, "m")
	fd, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	if err := fd.Truncate(3 * 4096); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(fd.Fd()), 0, 3*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	copy(m, "first")
	if err := unix.Msync(m, unix.MS_SYNC); err != nil {
		t.Fatal(err)
	}
	copy(m[4096:], "second, never synced")

	img := filepath.Join(t.TempDir(), "img")
	if err := f.Image(f.Len(), img, 0, nil); err != nil {
		t.Fatal(err)
	}
	got := read(t, filepath.Join(img, "m"))
	if len(got) != 3*4096 {
		t.Fatalf("image size %d, want %d (the truncate was committed)", len(got), 3*4096)
	}
	if !bytes.HasPrefix(got, []byte("first")) {
		t.Errorf("image lost the msynced page: %q", got[:8])
	}
	if !bytes.Equal(got[4096:4096+6], make([]byte, 6)) {
		t.Errorf("image holds a page that was never synced: %q", got[4096:4096+6])
	}
}

// FailSync makes fsync fail with EIO for files and directories.
func TestFailSync(t *testing.T) {
	f := mount(t)
	fd, err := os.Create(filepath.Join(f.Dir, "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	f.FailSync(true)
	if err := fd.Sync(); !errors.Is(err, syscall.EIO) {
		t.Errorf("fsync with FailSync = %v, want EIO", err)
	}
	dir, err := os.Open(f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	if err := dir.Sync(); !errors.Is(err, syscall.EIO) {
		t.Errorf("directory fsync with FailSync = %v, want EIO", err)
	}
	f.FailSync(false)
	if err := fd.Sync(); err != nil {
		t.Errorf("fsync after FailSync(false) = %v", err)
	}
	if err := dir.Sync(); err != nil {
		t.Errorf("directory fsync after FailSync(false) = %v", err)
	}
	var kinds []crashfs.OpKind
	for _, op := range f.Ops(-1) {
		kinds = append(kinds, op.Kind)
	}
	want := []crashfs.OpKind{crashfs.OpCreate, crashfs.OpFsync, crashfs.OpFsyncDir}
	if len(kinds) != len(want) {
		t.Fatalf("recorded %v, want %v (failed fsyncs are not recorded)", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("recorded %v, want %v", kinds, want)
		}
	}
}
