package persistence_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/persistence"
	"github.com/lisabot/lisa/testkit/crashfs"
)

// Power loss, simulated. A child process runs the store under load on a
// crashfs mount: a sync loop commits cursors with candidates, room loops
// take candidates into their journals, wait for barriers and save
// snapshots, and the child prints a line for every write whose barrier
// or durable call returned. The parent kills the child at a random
// moment, then builds images of the store as stable storage would hold
// them had the power failed after a random prefix of what reached the
// file system (crashfs: only fsynced data survives, names and sizes as
// ext4's journal orders them), opens each with OpenBadger and checks
// Lisa's invariants:
//
//   - the store opens, and every journal is contiguous (no gap);
//   - the sync cursor never covers a candidate that is gone: each
//     candidate up to the cursor is in its room's inbox, in its room's
//     journal, or was being removed;
//   - every write acknowledged before the cut (barrier or durable call
//     returned, line read by the parent) is there, and every removal
//     acknowledged before the cut stays removed.
//
// The seed (LISA_POWERLOSS_SEED, default below) fixes the workload, the
// kill times, the cuts and which unsynced pages survive; the operating
// system's timing is not reproducible, so a failure names its seed,
// round and cut, and rerunning with the seed replays the same plan.

const (
	powerChildEnv     = "LISA_PERSISTENCE_POWER_CHILD_DIR"
	powerChildSeedEnv = "LISA_PERSISTENCE_POWER_CHILD_SEED"
	powerRooms        = 4
	defaultPowerSeed  = 20261205
)

func powerRoom(i int) string { return fmt.Sprintf("!power%d:hs", i) }

func powerJournal(i int) string { return "rooms/" + powerRoom(i) }

func candidateRoom(n uint64) int { return int(n % powerRooms) }

func candidateEvent(n uint64) string { return fmt.Sprintf("$c%d", n) }

// removedByDurableWrite says which candidates a room removes from its
// inbox with RemoveInbox (a durable write, and no journal record) instead
// of taking them into its journal: one in 25, so that the lost-mention
// check exempts only those whose removal had begun.
func removedByDurableWrite(ev string) bool {
	n, err := strconv.ParseUint(strings.TrimPrefix(ev, "$c"), 10, 64)
	return err == nil && n%25 == 0
}

// candidateBody is the body of candidate n: long enough that a round
// fills several of Badger's 8 MiB memtables, and checkable.
func candidateBody(n uint64, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, n))
	size := 1000 + r.IntN(24000)
	return strings.Repeat(string(rune('a'+n%26)), size)
}

// powerChild runs the workload until it is killed. Output lines:
//
//	cur N          the cursor s<N> (and every candidate up to N) is durable
//	j ROOM IDX     journal index IDX of room ROOM is durable
//	snap ROOM IDX  a snapshot at IDX of room ROOM is durable
//	rm-start EV    the removal of candidate EV from its inbox has begun
//	rm EV          the removal of candidate EV is durable
func powerChild(dir string, seed uint64) int {
	s, err := persistence.OpenBadger(dir, persistence.BadgerOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	var outMu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(4)
	}
	go func() { // the sync loop
		r := rand.New(rand.NewPCG(seed, 0))
		for n := uint64(1); ; n++ {
			c := &roompb.Candidate{RoomId: powerRoom(candidateRoom(n)), EventId: candidateEvent(n), Body: candidateBody(n, seed)}
			if _, err := s.CommitSync(&roompb.SyncCursor{NextBatch: fmt.Sprintf("s%d", n), BaselineDone: true}, []*roompb.Candidate{c}); err != nil {
				fail(err)
			}
			if r.IntN(3) == 0 {
				if err := s.Sync(); err != nil {
					fail(err)
				}
				say("cur %d", n)
			}
		}
	}()
	for room := range powerRooms {
		go func() { // a room loop
			r := rand.New(rand.NewPCG(seed, uint64(room)+1))
			name := powerJournal(room)
			next := uint64(0)
			for {
				inbox, err := s.Inbox(powerRoom(room))
				if err != nil {
					fail(err)
				}
				if len(inbox) == 0 {
					time.Sleep(time.Millisecond) // the child's pace only
					continue
				}
				for _, c := range inbox {
					if removedByDurableWrite(c.GetEventId()) { // removed durably, no record
						say("rm-start %s", c.GetEventId())
						if err := s.RemoveInbox(c.GetRoomId(), c.GetEventId()); err != nil {
							fail(err)
						}
						say("rm %s", c.GetEventId())
						continue
					}
					var ev proto.Message = &roompb.InvocationQueued{Candidate: c}
					if r.IntN(10) == 0 { // refused: taken with a record, like a full queue
						ev = &roompb.InvocationRefused{Candidate: c}
					}
					if err := s.AppendEvent(name, next, ev); err != nil {
						fail(err)
					}
					queued := next
					next++
					wait := s.Barrier()
					// Lazy writes after the barrier's point, as a room
					// goes on while its send waits.
					for range r.IntN(3) {
						if err := s.AppendEvent(name, next, &roompb.InvocationStarted{EventId: c.GetEventId(), Attempt: 1}); err != nil {
							fail(err)
						}
						next++
					}
					if err := wait(); err != nil {
						fail(err)
					}
					say("j %d %d", room, queued)
					if r.IntN(25) == 0 {
						if err := s.SaveSnapshot(name, next-1, &roompb.SyncCursor{NextBatch: strconv.FormatUint(next-1, 10)}); err != nil {
							fail(err)
						}
						say("snap %d %d", room, next-1)
					}
				}
			}
		}()
	}
	select {}
}

// powerLine is one line of the child's output and how far the file
// system's record had come when the parent read it.
type powerLine struct {
	kind string
	room int
	n    uint64
	ev   string
	pos  int
}

func parsePowerLine(s string, pos int) (powerLine, bool) {
	f := strings.Fields(s)
	l := powerLine{pos: pos}
	if len(f) == 0 {
		return l, false
	}
	l.kind = f[0]
	var err error
	switch {
	case l.kind == "cur" && len(f) == 2:
		l.n, err = strconv.ParseUint(f[1], 10, 64)
	case (l.kind == "j" || l.kind == "snap") && len(f) == 3:
		l.room, err = strconv.Atoi(f[1])
		if err == nil {
			l.n, err = strconv.ParseUint(f[2], 10, 64)
		}
	case (l.kind == "rm" || l.kind == "rm-start") && len(f) == 2:
		l.ev = f[1]
	default:
		return l, false
	}
	return l, err == nil
}

func TestPowerLossKeepsWhatBarriersCovered(t *testing.T) {
	crashfs.Require(t)
	seed := uint64(defaultPowerSeed)
	if v := os.Getenv("LISA_POWERLOSS_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("LISA_POWERLOSS_SEED: %v", err)
		}
	}
	rounds, cuts := 12, 5
	if testing.Short() {
		rounds = 3
	}
	plan := rand.New(rand.NewPCG(seed, 0xc0ffee))
	mnt, backing := t.TempDir(), t.TempDir()
	images := 0
	for round := range rounds {
		fsys, err := crashfs.Mount(mnt, backing)
		if err != nil {
			t.Fatal(err)
		}
		mounted := true
		t.Cleanup(func() {
			if mounted {
				_ = fsys.Unmount()
			}
		})
		dir := filepath.Join(fsys.Dir, fmt.Sprintf("round%d", round))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		runFor := time.Duration(400+plan.IntN(1600)) * time.Millisecond
		lines := runPowerChild(t, fsys, dir, seed+uint64(round), runFor)
		total := fsys.Len()
		// Random moments, the end, and the moments just after the first
		// fsync of each new memtable log: a memtable was set aside
		// there, and its log is not yet a table.
		points := []int{total}
		for range cuts - 1 {
			points = append(points, 1+plan.IntN(total))
		}
		points = append(points, rotationCuts(fsys.Ops(total))...)
		for c, cut := range points {
			keep := 0.0
			if c%2 == 1 {
				keep = 0.5
			}
			img := filepath.Join(t.TempDir(), "img")
			if err := fsys.Image(cut, filepath.Join(img), keep, rand.New(rand.NewPCG(seed, uint64(round*100+c)))); err != nil {
				t.Fatal(err)
			}
			where := fmt.Sprintf("seed %d round %d cut %d/%d (op %d of %d, unsynced pages kept %.0f%%)", seed, round, c+1, len(points), cut, total, keep*100)
			checkPowerImage(t, filepath.Join(img, fmt.Sprintf("round%d", round)), seed+uint64(round), lines, cut, where)
			images++
			_ = os.RemoveAll(img)
		}
		mounted = false
		if err := fsys.Unmount(); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(backing, fmt.Sprintf("round%d", round))); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d: %d rounds, %d power-loss images checked", seed, rounds, images)
}

// rotationCuts returns the positions just after the first fsync of each
// memtable log but the first.
func rotationCuts(ops []crashfs.Op) []int {
	var cuts []int
	seen := map[string]bool{}
	first := true
	for i, op := range ops {
		if op.Kind != crashfs.OpFsync || !strings.HasSuffix(op.Path, ".mem") || seen[op.Path] {
			continue
		}
		seen[op.Path] = true
		if first {
			first = false
			continue
		}
		cuts = append(cuts, i+1)
	}
	return cuts
}

// runPowerChild runs the child on dir for d, kills it, and returns its
// lines, each with the file system's record length when it was read.
func runPowerChild(t *testing.T, fsys *crashfs.FS, dir string, seed uint64, d time.Duration) []powerLine {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), powerChildEnv+"="+dir, powerChildSeedEnv+"="+strconv.FormatUint(seed, 10))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []powerLine
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if l, ok := parsePowerLine(sc.Text(), fsys.Len()); ok {
				lines = append(lines, l)
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { <-done; exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("power child exited by itself: %v: %s", err, stderr.String())
	case <-time.After(d): // the moment of the power cut is random: d is drawn from the seed
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	if len(lines) == 0 {
		t.Fatalf("power child acknowledged nothing in %v: %s", d, stderr.String())
	}
	return lines
}

// checkPowerImage opens one image and checks the invariants against the
// lines read before the cut (required) and all lines (permitted).
func checkPowerImage(t *testing.T, dir string, seed uint64, lines []powerLine, cut int, where string) {
	t.Helper()
	s, err := persistence.OpenBadger(dir, persistence.BadgerOptions{})
	if err != nil {
		t.Fatalf("%s: the store does not open: %v", where, err)
	}
	defer s.Close()

	removing := map[string]bool{}
	for _, l := range lines {
		if l.kind == "rm-start" {
			removing[l.ev] = true
		}
	}
	taken := map[string]bool{}
	for room := range powerRooms {
		name := powerJournal(room)
		from := uint64(0)
		_, snapIdx, ok, err := s.LatestSnapshot(name)
		if err != nil {
			t.Fatalf("%s: room %d snapshot: %v", where, room, err)
		}
		n := uint64(0)
		err = s.Events(name, from, 0, func(i uint64, m proto.Message) error {
			n = i + 1
			var c *roompb.Candidate
			switch e := m.(type) {
			case *roompb.InvocationQueued:
				c = e.GetCandidate()
			case *roompb.InvocationRefused:
				c = e.GetCandidate()
			}
			if c != nil {
				num, perr := strconv.ParseUint(strings.TrimPrefix(c.GetEventId(), "$c"), 10, 64)
				if perr != nil || c.GetBody() != candidateBody(num, seed) || c.GetRoomId() != powerRoom(room) {
					return fmt.Errorf("record %d torn: %s", i, c.GetEventId())
				}
				taken[c.GetEventId()] = true
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: room %d journal: %v", where, room, err)
		}
		for _, l := range lines {
			if l.pos > cut || l.room != room {
				continue
			}
			switch l.kind {
			case "j":
				if l.n >= n {
					t.Fatalf("%s: room %d journal ends before index %d, whose barrier had returned (journal has %d events)", where, room, l.n, n)
				}
			case "snap":
				if !ok || snapIdx < l.n {
					t.Fatalf("%s: room %d: snapshot at %d was acknowledged, latest is %d (found %v)", where, room, l.n, snapIdx, ok)
				}
			}
		}
	}

	cur, err := s.Cursor()
	if err != nil {
		t.Fatalf("%s: cursor: %v", where, err)
	}
	curN := uint64(0)
	if nb := cur.GetNextBatch(); nb != "" {
		if curN, err = strconv.ParseUint(strings.TrimPrefix(nb, "s"), 10, 64); err != nil {
			t.Fatalf("%s: cursor %q", where, nb)
		}
	}
	inboxed := map[string]bool{}
	for room := range powerRooms {
		in, err := s.Inbox(powerRoom(room))
		if err != nil {
			t.Fatalf("%s: inbox: %v", where, err)
		}
		for _, c := range in {
			inboxed[c.GetEventId()] = true
		}
	}
	for _, l := range lines {
		if l.pos > cut {
			continue
		}
		switch l.kind {
		case "cur":
			if curN < l.n {
				t.Fatalf("%s: cursor s%d was acknowledged durable, the store has s%d", where, l.n, curN)
			}
		case "rm":
			if inboxed[l.ev] {
				t.Fatalf("%s: %s was durably removed from its inbox and is back", where, l.ev)
			}
		}
	}
	for n := uint64(1); n <= curN; n++ {
		ev := candidateEvent(n)
		if !inboxed[ev] && !taken[ev] && !removing[ev] {
			t.Fatalf("%s: the cursor s%d covers candidate %s, which is in neither inbox nor journal: a lost mention", where, curN, ev)
		}
	}
}
