package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/actors/room"
	"github.com/lisabot/lisa/daemon"
	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/persistence"
	"github.com/lisabot/lisa/trail"
)

// scaleReport is what idle rooms cost and how fast Lisa starts.
type scaleReport struct {
	IdleRooms int `json:"idle_rooms"`
	// RSSPerRoomKiB is the resident memory an idle allowed room adds: the
	// RSS growth of a daemon with IdleRooms rooms minus that of a daemon
	// with one room, divided by IdleRooms - 1.
	RSSPerRoomKiB  float64 `json:"rss_per_room_kib"`
	HeapPerRoomKiB float64 `json:"go_heap_per_room_kib"`
	// ReadySeconds is from starting Lisa (configuration, whoami, store
	// open, actor tree) to her reply to a mention that was waiting in the
	// room the start-up sweep reaches last, with ReadyRooms rooms and
	// JournalEvents journal events on disk: how long until Lisa answers
	// in any room.
	ReadySeconds float64 `json:"ready_seconds"`
	// AllLiveSeconds is from the same start to every room replayed and
	// live (the background start-up sweep is over).
	AllLiveSeconds float64 `json:"all_rooms_live_seconds"`
	// StartSeconds is until startDaemon returned (configuration, whoami,
	// store open, actor tree spawned).
	StartSeconds  float64 `json:"daemon_start_seconds"`
	ReadyRooms    int     `json:"ready_rooms"`
	JournalEvents int     `json:"journal_events"`
	// ReplayedEvents are the events replayed at start: those after each
	// room's latest snapshot.
	ReplayedEvents int `json:"replayed_events"`
	// ReadyAfterCrashSeconds is ReadySeconds on the same store when the
	// run before did not stop cleanly: the first /sync answer is then read
	// back room by room (one GET /messages per allowed room) before any
	// mention in it is routed.
	ReadyAfterCrashSeconds float64 `json:"ready_after_crash_seconds"`
	// Trail is the event trail's memory with every ring full.
	Trail trailReport `json:"trail_full_rings"`
	// Startup is the start-up measured for each journal shape; the
	// fields above repeat the first (current) shape's figures.
	Startup []startupReport `json:"startup"`
}

// memSample is the process's memory after a full GC that returns freed
// memory to the OS.
type memSample struct{ rssKiB, heapKiB int64 }

func sampleMemory() memSample {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, _ := procField("/proc/self/status", "VmRSS:")
	return memSample{rssKiB: rss, heapKiB: int64(ms.HeapInuse / 1024)}
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// settle lets the actors finish what starting them scheduled.
func settle() { time.Sleep(500 * time.Millisecond) }

// benchScale measures what idle rooms cost and how fast Lisa starts with
// journals on disk, cleanly stopped and after a crash.
func benchScale(ctx context.Context, work string, o benchOptions, step func(string, ...any)) (*scaleReport, error) {
	rep := &scaleReport{IdleRooms: o.idleRooms, ReadyRooms: o.idleRooms}
	replies := newArrivals(nil)
	stack, err := startFakeStack(o.idleRooms, "idle", replies, nil)
	if err != nil {
		return nil, err
	}
	defer stack.Close()
	s := &scaleRun{work: work, o: o, stack: stack, replies: replies, rep: rep}
	if err := s.measureRoomCost(ctx); err != nil {
		return nil, err
	}
	step("scale: event trail with %d rooms × %d events (full rings)", trailRooms, trail.DefaultPerRoom)
	rep.Trail = benchTrail(trailRooms, trail.DefaultPerRoom)

	for _, shape := range startupShapes(o) {
		step("scale: start-up with %d rooms × %d journal events (%s shape)", o.idleRooms, shape.perRoom, shape.name)
		sr, err := s.measureStartup(ctx, shape)
		if err != nil {
			return nil, fmt.Errorf("start-up, %s shape: %w", shape.name, err)
		}
		rep.Startup = append(rep.Startup, sr)
	}
	rep.fillLegacy()
	return rep, nil
}

// trailRooms is how many rooms the trail measurement fills.
const trailRooms = 1000

// scaleRun is one run of the scale bench: the fake stack Lisa runs
// against, the replies it sees arrive, and the report being filled in.
type scaleRun struct {
	work    string
	o       benchOptions
	stack   *fakeStack
	replies *arrivals
	rep     *scaleReport
	// mentions numbers the mentions posted to time answers.
	mentions int
}

// measureRoomCost measures the memory of one room, then all rooms, each
// on a fresh store, and reports what each room beyond the first adds.
func (s *scaleRun) measureRoomCost(ctx context.Context) error {
	rooms := s.stack.rooms
	one, err := s.measureMemory(ctx, "one", rooms[:1])
	if err != nil {
		return err
	}
	all, err := s.measureMemory(ctx, "all", rooms)
	if err != nil {
		return err
	}
	if n := s.o.idleRooms - 1; n > 0 {
		s.rep.RSSPerRoomKiB = float64(all.rssKiB-one.rssKiB) / float64(n)
		s.rep.HeapPerRoomKiB = float64(all.heapKiB-one.heapKiB) / float64(n)
	}
	return nil
}

// measureMemory is the memory a Lisa with rooms rs adds once they are
// live, on a fresh store in the work directory name. With all rooms it
// writes the heap profile asked for.
func (s *scaleRun) measureMemory(ctx context.Context, name string, rs []string) (memSample, error) {
	before := sampleMemory()
	lisa, err := startBenchLisa(ctx, filepath.Join(s.work, name), s.stack.target(), s.stack.llm.URL(), rs, 3, s.o.logOut)
	if err != nil {
		return memSample{}, err
	}
	defer lisa.stop()
	if err := lisa.d.AwaitBaseline(ctx, time.Minute); err != nil {
		return memSample{}, err
	}
	if err := lisa.awaitRooms(ctx, rs); err != nil {
		return memSample{}, err
	}
	settle()
	after := sampleMemory()
	if name == "all" && s.o.heapProfile != "" {
		if err := writeHeapProfile(s.o.heapProfile); err != nil {
			return memSample{}, err
		}
	}
	return memSample{rssKiB: after.rssKiB - before.rssKiB, heapKiB: after.heapKiB - before.heapKiB}, nil
}

// forgetCleanStop removes the clean-stop mark of the store in dir, as a
// crash would have left it.
func forgetCleanStop(dir string) error {
	store, err := persistence.OpenBadger(dir, persistence.BadgerOptions{})
	if err != nil {
		return err
	}
	// Without a mark (the stop left a check pending) the store already is
	// as a crash leaves it.
	_, err = store.TakeCleanStop()
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	return err
}

// prepareJournals records a sync cursor at since and writes perRoom
// journal events for every room — invocations produced by the room machine itself, answered
// one after another — with the snapshots Lisa would have taken, and no
// compaction (so every event is still on disk). It returns how many events
// lie after the latest snapshots, which a start has to replay.
func prepareJournals(dir string, rooms []string, perRoom int, since string) (int, error) {
	store, err := persistence.OpenBadger(dir, persistence.BadgerOptions{})
	if err != nil {
		return 0, err
	}
	defer store.Close()
	// Lisa has synced before: her next /sync continues from since.
	if _, err := store.CommitSync(&roompb.SyncCursor{NextBatch: since, BaselineDone: true, UpdatedAtMs: time.Now().UnixMilli()}, nil); err != nil {
		return 0, err
	}
	replayed := 0
	var batch []persistence.BulkEntry
	for _, r := range rooms {
		name := "app/rooms/" + r
		evs, snaps := roomHistory(r, perRoom)
		last := 0
		for idx := range snaps {
			last = max(last, idx)
		}
		if snap, ok := snaps[last]; ok {
			batch = append(batch, persistence.BulkEntry{Name: name, Index: uint64(last), Snapshot: true, Msg: snap})
		}
		// As Lisa leaves a journal: each snapshot compacts the events
		// and snapshots before it (persistence.Provider.PersistSnapshot).
		for i := last; i < len(evs); i++ {
			batch = append(batch, persistence.BulkEntry{Name: name, Index: uint64(i), Msg: evs[i]})
		}
		replayed += len(evs) - last
		if len(batch) > 50_000 {
			if err := store.BulkLoad(batch); err != nil {
				return 0, err
			}
			batch = batch[:0]
		}
	}
	if err := store.BulkLoad(batch); err != nil {
		return 0, err
	}
	// As a Lisa that stopped cleanly leaves it (see ReadyAfterCrashSeconds
	// for the other case).
	if err := store.MarkCleanStop(); err != nil {
		return 0, err
	}
	return replayed, nil
}

// roomHistory drives a room machine through answered invocations until it
// has produced n journal events, taking snapshots where protoactor's
// plugin would (before every event whose index is a multiple of the
// snapshot interval).
func roomHistory(roomID string, n int) ([]proto.Message, map[int]*roompb.RoomSnapshot) {
	m := room.NewMachine(room.Policy{RoomID: roomID, MaxAttempts: 3, RetryBase: time.Second, RetryMax: time.Second,
		SendRetryBase: time.Second, SendRetryMax: time.Second, ErrorReply: func(*roompb.Candidate) []byte { return []byte(`{}`) }})
	var evs []proto.Message
	snaps := map[int]*roompb.RoomSnapshot{}
	now := time.Unix(1_700_000_000, 0)
	content := []byte(`{"msgtype":"m.text","body":"Pong."}`)
	var inputs []room.Input
	run := func(out room.Output) {
		for _, ev := range out.Events {
			if len(evs)%daemon.SnapshotInterval == 0 {
				snaps[len(evs)] = m.Snapshot()
			}
			evs = append(evs, ev)
			if err := m.Apply(ev); err != nil {
				panic(err) // the machine's own events always apply
			}
		}
		for _, eff := range append(out.Early, out.Effects...) {
			switch e := eff.(type) {
			case room.RequestSlot:
				inputs = append(inputs, room.SlotGranted{})
			case room.StartInvocation:
				inputs = append(inputs, room.InvocationDone{EventID: e.Candidate.GetEventId(), Attempt: e.Attempt, Content: content})
			case room.SendReply:
				inputs = append(inputs, room.SendDone{EventID: e.EventID, ReplyEventID: "$reply-" + e.EventID})
			}
		}
	}
	step := func(in room.Input) {
		run(m.Decide(in, now))
		for {
			out := m.Pump(now)
			if out.Empty() {
				return
			}
			run(out)
		}
	}
	step(room.Recovered{})
	// Whole answered invocations (4 events each) while they fit, then
	// repeated inbox entries (one InvocationDuplicate each): from n = 4
	// on, the journal ends with nothing in flight, as an idle room's does.
	k := 0
	for ; len(evs)+4 <= n || k == 0; k++ {
		now = now.Add(time.Minute)
		cand := &roompb.Candidate{RoomId: roomID, EventId: fmt.Sprintf("$m%d", k), Sender: benchHuman, Body: "Lisa, ping", Trigger: "mention", InboxSeq: uint64(k + 1)}
		inputs = append(inputs, room.InboxLoaded{Candidates: []*roompb.Candidate{cand}})
		for len(inputs) > 0 && len(evs) < n {
			in := inputs[0]
			inputs = inputs[1:]
			step(in)
		}
		inputs = inputs[:0]
	}
	for len(evs) < n {
		now = now.Add(time.Minute)
		again := &roompb.Candidate{RoomId: roomID, EventId: fmt.Sprintf("$m%d", k-1), Sender: benchHuman, Body: "Lisa, ping", Trigger: "mention"}
		step(room.InboxLoaded{Candidates: []*roompb.Candidate{again}})
	}
	for idx := range snaps {
		if idx > n {
			delete(snaps, idx)
		}
	}
	return evs[:n], snaps
}
