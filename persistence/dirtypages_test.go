package persistence_test

import (
	"bytes"
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
	"github.com/lisabot/lisa/testkit/need"
)

// kpageflags is what TestNoDirtyLogPageAfterABarrier needs: the kernel's
// page flags (root on Linux) and an ext4 in data=writeback on a loop
// device (mkfs.ext4, loop devices, root). LISA_REQUIRE_KPAGEFLAGS=1
// (.ci/run sets it) makes their absence a failure.
var kpageflags = need.Tool{Name: "kpageflags", RequireEnv: "LISA_REQUIRE_KPAGEFLAGS",
	Fix: "run as root on Linux, with mkfs.ext4 (Debian e2fsprogs) and loop devices",
	Check: func() string {
		if os.Geteuid() != 0 {
			return "not root: page frame numbers are hidden"
		}
		f, err := os.Open("/proc/kpageflags")
		if err != nil {
			return err.Error()
		}
		_ = f.Close()
		if _, err := exec.LookPath("mkfs.ext4"); err != nil {
			return "mkfs.ext4 not found"
		}
		return ""
	}}

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
			kpageflags.Missing(t, fmt.Sprintf("%s %v: %v: %s", name, args, err, strings.TrimSpace(string(out))))
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
func dirtyPages(t *testing.T, path string) (dirty int, present bool) {
	t.Helper()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			// A fault in the mapping (SIGBUS: the file was truncated under
			// it) panics with a runtime error that has an Addr method
			// (see debug.SetPanicOnFault).
			if _, ok := r.(interface{ Addr() uintptr }); ok {
				dirty, present = 0, false
				return
			}
			panic(r)
		}
	}()
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, false // flushed into a table and removed
		}
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() == 0 {
		return 0, false // emptied before its removal
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
	return dirty, true
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
	kpageflags.Need(t)
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
	// A set-aside log (one with a newer beside it) is checked only when it
	// still exists after the barrier: Badger usually turns it into a
	// table while the barrier syncs it. TestLogSyncerSyncsSetAsideLogs
	// checks that case without the race.
	barriers, setAside := 0, 0
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
		newestMem := ""
		for _, e := range entries {
			if filepath.Ext(e.Name()) == ".mem" && e.Name() > newestMem {
				newestMem = e.Name() // fixed-width names: newest sorts last
			}
		}
		for _, e := range entries {
			ext := filepath.Ext(e.Name())
			if ext != ".mem" && ext != ".vlog" {
				continue
			}
			logs[e.Name()] = true
			n, present := dirtyPages(t, filepath.Join(dir, e.Name()))
			if n > 0 {
				t.Fatalf("round %d: %s has %d dirty pages after a barrier returned", round, e.Name(), n)
			}
			if present {
				checks++
				if ext == ".mem" && e.Name() != newestMem {
					setAside++
				}
			}
		}
	}
	mems := 0
	for l := range logs {
		if filepath.Ext(l) == ".mem" {
			mems++
		}
	}
	t.Logf("%d barriers, %d log checks (%d of set-aside memtable logs), %d memtable logs", barriers, checks, setAside, mems)
}

// TestLogSyncerSyncsSetAsideLogs: the store's sync leaves no dirty page in
// any log: a memtable log written after the last sync and then set aside
// (a newer one exists), the new one, and the value log. Plain files stand
// for Badger's, so no table flush races the check. With Badger's own
// DB.Sync (the newest logs only) the set-aside log keeps its tail dirty.
func TestLogSyncerSyncsSetAsideLogs(t *testing.T) {
	kpageflags.Need(t)
	dir := writebackFS(t)
	sync, closeSync := persistence.NewLogSyncerForTest(dir)
	defer closeSync()
	write := func(name string, off int64, n int) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(bytes.Repeat([]byte{'x'}, n), off); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	clean := func(when string) {
		t.Helper()
		for _, name := range []string{"00001.mem", "00002.mem", "000001.vlog"} {
			if n, _ := dirtyPages(t, filepath.Join(dir, name)); n > 0 {
				t.Errorf("%s: %s has %d dirty pages after the sync", when, name, n)
			}
		}
	}
	write("00001.mem", 0, 64<<10)
	write("000001.vlog", 0, 20)
	if err := sync(); err != nil {
		t.Fatal(err)
	}
	clean("first sync")
	write("00001.mem", 64<<10, 64<<10) // commits after the last sync
	write("00002.mem", 0, 8<<10)       // then the memtable was set aside
	write("000001.vlog", 20, 4<<10)
	if n, _ := dirtyPages(t, filepath.Join(dir, "00001.mem")); n == 0 {
		t.Fatal("the set-aside log has no dirty page before the sync: the check cannot see one")
	}
	if err := sync(); err != nil {
		t.Fatal(err)
	}
	clean("sync after the rotation")
}
