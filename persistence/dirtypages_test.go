package persistence_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"unsafe"

	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/persistence"
)

// requireKPageFlags skips t with one line where the kernel's page flags
// cannot be read (they need root), unless LISA_REQUIRE_KPAGEFLAGS=1
// (.ci/run sets it) makes that a failure.
func requireKPageFlags(t *testing.T) {
	t.Helper()
	f, err := os.Open("/proc/kpageflags")
	if err == nil {
		_ = f.Close()
		if os.Geteuid() == 0 {
			return
		}
		err = fmt.Errorf("not root: page frame numbers are hidden")
	}
	if os.Getenv("LISA_REQUIRE_KPAGEFLAGS") == "1" {
		t.Fatalf("persistence: /proc/kpageflags: %v (LISA_REQUIRE_KPAGEFLAGS=1)", err)
	}
	t.Skipf("persistence: /proc/kpageflags: %v; run as root on Linux", err)
}

// writebackFS mounts a fresh ext4 file system in data=writeback mode on a
// loop device and returns a directory on it. In the default data=ordered
// mode, ext4's journal commit (which any fsync forces) writes out the
// data of blocks allocated in that transaction, for every file: that
// would hide a log the store forgot to sync. data=writeback (and xfs,
// and btrfs) give no such help, and Lisa must not depend on it.
func writebackFS(t *testing.T) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "fs.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 512<<20); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			if os.Getenv("LISA_REQUIRE_KPAGEFLAGS") != "1" {
				t.Skipf("persistence: %s: %v: %s (needs e2fsprogs and loop devices)", name, err, out)
			}
			t.Fatalf("%s %v: %v: %s", name, args, err, out)
		}
	}
	run("mkfs.ext4", "-q", "-F", img)
	mnt := t.TempDir()
	run("mount", "-o", "loop,data=writeback", img, mnt)
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	dir := filepath.Join(mnt, "store")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Kernel page flags (include/uapi/linux/kernel-page-flags.h).
const (
	kpfDirty     = 1 << 4
	kpfWriteback = 1 << 8
)

// dirtyPages returns how many pages of the file at path are dirty or under
// writeback in the page cache: mapped read-only here, the resident pages
// (mincore) are touched, and their frames looked up in /proc/self/pagemap
// and /proc/kpageflags. A file Badger truncates while it is looked at (it
// empties a memtable log before deleting it, once the log is a table)
// counts as clean.
func dirtyPages(t *testing.T, path string) (dirty int) {
	t.Helper()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if err, ok := r.(runtime.Error); ok && strings.Contains(err.Error(), "fault") {
				dirty = 0 // truncated under the mapping (SIGBUS)
				return
			}
			panic(r)
		}
	}()
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return 0 // flushed into a table and removed
		}
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() == 0 {
		return 0
	}
	page := int64(os.Getpagesize())
	size := (st.Size() + page - 1) / page * page
	m, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	resident := make([]byte, size/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&resident[0]))); errno != 0 {
		t.Fatal(errno)
	}
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	defer pagemap.Close()
	kflags, err := os.Open("/proc/kpageflags")
	if err != nil {
		t.Fatal(err)
	}
	defer kflags.Close()
	base := uint64(uintptr(unsafe.Pointer(&m[0]))) / uint64(page)
	var sink byte
	buf := make([]byte, 8)
	for i := range resident {
		if resident[i]&1 == 0 {
			continue
		}
		sink ^= m[int64(i)*page] // map the cached page into this process
		if _, err := pagemap.ReadAt(buf, int64(base+uint64(i))*8); err != nil {
			t.Fatal(err)
		}
		e := binary.LittleEndian.Uint64(buf)
		if e&(1<<63) == 0 {
			continue // not present after all (reclaimed meanwhile): clean
		}
		pfn := e & (1<<55 - 1)
		if _, err := kflags.ReadAt(buf, int64(pfn)*8); err != nil {
			t.Fatal(err)
		}
		if binary.LittleEndian.Uint64(buf)&(kpfDirty|kpfWriteback) != 0 {
			dirty++
		}
	}
	runtime.KeepAlive(sink)
	return dirty
}

// TestNoDirtyLogPageAfterABarrier writes lazily through several memtable
// rotations and checks, after every barrier, that no page of any of the
// store's logs (memtable write-ahead logs, value logs) is dirty or under
// writeback: whatever a barrier covers is on the disk, including the logs
// Badger has set aside. Tables, the manifest and Badger's discard stats
// are left out: Badger's own goroutines write them at any moment, sync
// tables before it names them in the manifest and the manifest with
// every change, and never holds a commit in them that no log holds.
func TestNoDirtyLogPageAfterABarrier(t *testing.T) {
	requireKPageFlags(t)
	dir := writebackFS(t)
	s, err := persistence.OpenBadger(dir, persistence.BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const name = "rooms/!dirty:hs"
	body := strings.Repeat("x", 16<<10)
	logs := map[string]bool{}
	next := uint64(0)
	checks := 0
	memLogs := func() int {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range entries {
			if filepath.Ext(e.Name()) == ".mem" {
				n++
			}
		}
		return n
	}
	barriers := 0
	for round := 0; round < 60; round++ {
		// Lazy writes until 40 are done or a memtable was just set aside:
		// then the barrier comes while the set-aside log is not yet a
		// table, the moment a barrier used to miss it.
		before := memLogs()
		for i := 0; i < 40; i++ {
			c := &roompb.Candidate{RoomId: "!dirty:hs", EventId: fmt.Sprintf("$%d", next), Body: body}
			if err := s.AppendEvent(name, next, &roompb.InvocationQueued{Candidate: c}); err != nil {
				t.Fatal(err)
			}
			next++
			if memLogs() > before {
				break
			}
		}
		if err := s.Barrier()(); err != nil {
			t.Fatal(err)
		}
		barriers++
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			ext := filepath.Ext(e.Name())
			if ext != ".mem" && ext != ".vlog" {
				continue
			}
			logs[e.Name()] = true
			if n := dirtyPages(t, filepath.Join(dir, e.Name())); n > 0 {
				t.Fatalf("round %d: %s has %d dirty pages after a barrier returned", round, e.Name(), n)
			}
			checks++
		}
	}
	mems := 0
	for l := range logs {
		if filepath.Ext(l) == ".mem" {
			mems++
		}
	}
	if mems < 3 {
		t.Fatalf("only %d memtable logs seen: the test did not cover a rotation", mems)
	}
	t.Logf("%d barriers, %d log checks, %d memtable logs", barriers, checks, mems)
}
