package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"github.com/lisabot/lisa/actors/rooms"
	"github.com/lisabot/lisa/daemon"
)

// startupShape is a shape of the journals on disk at start.
type startupShape struct {
	name    string
	perRoom int // journal events per room
}

// startupShapes are the shapes the start-up is measured with: the
// current one (-journal-events spread over the rooms, snapshots every
// daemon.SnapshotInterval events) and the worst one, where every room is
// one event short of its next snapshot, so a start replays the most
// events per room.
func startupShapes(o benchOptions) []startupShape {
	shapes := []startupShape{{name: "current", perRoom: max(1, o.journalEvents/o.idleRooms)}}
	if worst := daemon.SnapshotInterval - 1; worst != shapes[0].perRoom {
		shapes = append(shapes, startupShape{name: "worst", perRoom: worst})
	}
	return shapes
}

// startupReport is the start-up with one journal shape, after a clean
// stop and after a crash.
type startupReport struct {
	Shape         string `json:"shape"`
	Rooms         int    `json:"rooms"`
	EventsPerRoom int    `json:"events_per_room"`
	JournalEvents int    `json:"journal_events"`
	// ReplayedEvents are the events after each room's latest snapshot:
	// what a start replays.
	ReplayedEvents int      `json:"replayed_events"`
	Clean          startRun `json:"clean_stop"`
	Crash          startRun `json:"crash"`
}

// startRun is one start of Lisa on journals.
type startRun struct {
	// FirstAnswerSeconds is from starting Lisa (configuration, whoami,
	// store open, actor tree) to her reply to a mention waiting in the
	// room the start-up sweep reaches last.
	FirstAnswerSeconds float64 `json:"first_answer_seconds"`
	// AllLiveSeconds is from the same start to the end of the start-up
	// sweep: every room replayed and live.
	AllLiveSeconds float64 `json:"all_rooms_live_seconds"`
	// SweepSeconds is the sweep alone: from the rooms supervisor's start
	// to every room live.
	SweepSeconds float64 `json:"sweep_seconds"`
	// ReplayPerSecond is the replayed events divided by SweepSeconds:
	// journal reading, decoding and applying, and the actors' own start,
	// all included.
	ReplayPerSecond float64 `json:"replay_events_per_second"`
	// DaemonStartSeconds is until the daemon's start returned.
	DaemonStartSeconds float64 `json:"daemon_start_seconds"`
}

// measureStartup writes journals of one shape for every room and starts
// Lisa on them twice: as a clean stop leaves the store, then as a crash
// leaves it (no clean-stop mark: her first /sync answer is checked room
// by room).
func (s *scaleRun) measureStartup(ctx context.Context, shape startupShape) (startupReport, error) {
	rep := startupReport{Shape: shape.name, Rooms: len(s.stack.rooms), EventsPerRoom: shape.perRoom,
		JournalEvents: shape.perRoom * len(s.stack.rooms)}
	work := filepath.Join(s.work, "ready-"+shape.name)
	replayed, err := prepareJournals(filepath.Join(work, "data"), s.stack.rooms, shape.perRoom, s.stack.hs.Head())
	if err != nil {
		return rep, err
	}
	rep.ReplayedEvents = replayed
	// The worst shape's clean start is the one profiled.
	profile := shape.perRoom == daemon.SnapshotInterval-1
	if rep.Clean, err = s.timeStart(ctx, work, replayed, false, profile); err != nil {
		return rep, fmt.Errorf("after a clean stop: %w", err)
	}
	if rep.Crash, err = s.timeStart(ctx, work, replayed, true, false); err != nil {
		return rep, fmt.Errorf("after a crash: %w", err)
	}
	return rep, nil
}

// timeStart posts a mention in the room the sweep reaches last, starts
// Lisa on the store in work (first taking its clean-stop mark away if
// crashed), and times her answer and her sweep; then it stops her
// cleanly. With profile, a clean start is CPU-profiled (-start-cpu-profile).
func (s *scaleRun) timeStart(ctx context.Context, work string, replayed int, crashed, profile bool) (startRun, error) {
	var run startRun
	if crashed {
		if err := forgetCleanStop(filepath.Join(work, "data")); err != nil {
			return run, err
		}
	}
	last := slices.Max(s.stack.rooms) // the sweep goes in sorted order
	s.mentions++
	evID, _, err := s.stack.hs.Post(last, benchHuman, mention(benchBot, s.mentions))
	if err != nil {
		return run, err
	}
	answered := s.replies.expect(evID)
	if profile && !crashed {
		stopProfile, err := startCPUProfile(s.o.startProfile)
		if err != nil {
			return run, err
		}
		defer stopProfile()
	}
	start := time.Now()
	lisa, err := startBenchLisa(ctx, work, s.stack.target(), s.stack.llm.URL(), s.stack.rooms, 3, s.o.logOut)
	if err != nil {
		return run, err
	}
	defer lisa.stop()
	run.DaemonStartSeconds = time.Since(start).Seconds()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	select {
	case at := <-answered:
		run.FirstAnswerSeconds = at.Sub(start).Seconds()
	case <-wctx.Done():
		return run, fmt.Errorf("no answer after start: %w", wctx.Err())
	}
	sw, err := lisa.awaitSweep(wctx)
	if err != nil {
		return run, err
	}
	run.AllLiveSeconds = sw.Ended.Sub(start).Seconds()
	run.SweepSeconds = sw.Ended.Sub(sw.Began).Seconds()
	if run.SweepSeconds > 0 {
		run.ReplayPerSecond = float64(replayed) / run.SweepSeconds
	}
	return run, nil
}

// awaitSweep waits until the rooms supervisor's start-up sweep is over
// and returns its account.
func (l *benchLisa) awaitSweep(ctx context.Context) (*rooms.Sweep, error) {
	sys := l.d.System()
	for {
		res, err := sys.Root.RequestFuture(sys.RoomsPID(), &rooms.SweepRequest{}, 5*time.Second).Result()
		if err != nil {
			return nil, err
		}
		if sw, ok := res.(*rooms.Sweep); ok && sw.Done {
			return sw, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("start-up sweep not over: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// fillLegacy repeats the first shape's figures in the report's original
// fields.
func (r *scaleReport) fillLegacy() {
	if len(r.Startup) == 0 {
		return
	}
	cur := r.Startup[0]
	r.ReadySeconds, r.AllLiveSeconds, r.StartSeconds = cur.Clean.FirstAnswerSeconds, cur.Clean.AllLiveSeconds, cur.Clean.DaemonStartSeconds
	r.JournalEvents, r.ReplayedEvents = cur.JournalEvents, cur.ReplayedEvents
	r.ReadyAfterCrashSeconds = cur.Crash.FirstAnswerSeconds
}

// printStartup prints the start-up figures of each journal shape.
func printStartup(w io.Writer, shapes []startupReport) {
	for _, sr := range shapes {
		fmt.Fprintf(w, "  start-up, %s shape: %d rooms × %d events (%d replayed)\n", sr.Shape, sr.Rooms, sr.EventsPerRoom, sr.ReplayedEvents)
		for _, r := range []struct {
			name string
			run  startRun
		}{{"after a clean stop", sr.Clean}, {"after a crash", sr.Crash}} {
			fmt.Fprintf(w, "    %-40s first answer %.3f s, every room live %.3f s, replay %.0f events/s\n",
				r.name, r.run.FirstAnswerSeconds, r.run.AllLiveSeconds, r.run.ReplayPerSecond)
		}
	}
}

// startupTargets judges the first answer after a start in every shape,
// after a clean stop (issue #19) and after a crash (issue #27: a crashed
// start also reads the rooms back, docs/reliability.md). Both are goals:
// a member waits for that answer.
func startupTargets(shapes []startupReport) []targetResult {
	if len(shapes) == 0 {
		return nil
	}
	first, crashed := shapes[0], shapes[0]
	for _, sr := range shapes {
		if sr.Clean.FirstAnswerSeconds > first.Clean.FirstAnswerSeconds {
			first = sr
		}
		if sr.Crash.FirstAnswerSeconds > crashed.Crash.FirstAnswerSeconds {
			crashed = sr
		}
	}
	return []targetResult{
		{"start → first answer, every shape", "≤ 1 s", fmt.Sprintf("%.3f s at most (%s shape, %d rooms)", first.Clean.FirstAnswerSeconds, first.Shape, first.Rooms), first.Clean.FirstAnswerSeconds <= 1, kindGoal},
		{"start after a crash → first answer, every shape", "≤ 1 s", fmt.Sprintf("%.3f s at most (%s shape, %d rooms)", crashed.Crash.FirstAnswerSeconds, crashed.Shape, crashed.Rooms), crashed.Crash.FirstAnswerSeconds <= 1, kindGoal},
	}
}

// replayTarget guards the journal replay speed of a clean start, the
// slowest shape's.
func replayTarget(shapes []startupReport) []targetResult {
	if len(shapes) == 0 {
		return nil
	}
	slowest := shapes[0]
	for _, sr := range shapes {
		if sr.Clean.ReplayPerSecond < slowest.Clean.ReplayPerSecond {
			slowest = sr
		}
	}
	return []targetResult{{"replay", "≥ 300,000 events/s", fmt.Sprintf("%.0f events/s at least (%s shape)", slowest.Clean.ReplayPerSecond, slowest.Shape), slowest.Clean.ReplayPerSecond >= 300_000, kindGuard}}
}
