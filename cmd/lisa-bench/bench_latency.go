package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/testkit/dendrite"
	"github.com/lisabot/lisa/testkit/fakehs"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// latencyReport is bot-added latency: from the moment the homeserver can
// deliver a mention to the moment Lisa's reply PUT arrives.
type latencyReport struct {
	N        int     `json:"n"`
	P50Ms    float64 `json:"p50_ms"`
	P95Ms    float64 `json:"p95_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
	P50Ratio float64 `json:"p50_floor_ratio"`
	P95Ratio float64 `json:"p95_floor_ratio"`
	P99Ratio float64 `json:"p99_floor_ratio"`
	// Calls are the homeserver requests per endpoint during the measured
	// invocations, per invocation (fake homeserver only).
	CallsPerInvocation map[string]float64 `json:"calls_per_invocation,omitempty"`
	// Measured says where the two instants come from.
	Measured string `json:"measured"`
	// Segments split the latency at the requests the fake homeserver saw
	// (fake homeserver only): p50 and p99 of each segment in ms.
	Segments []segmentStats `json:"segments,omitempty"`

	// LisaP50Ms and LisaP99Ms leave out the fake LLM's own handling of
	// the request (an instant LLM takes no time; the fake needs some to
	// parse the prompt), fake homeserver only.
	LisaP50Ms    float64 `json:"lisa_p50_ms,omitempty"`
	LisaP99Ms    float64 `json:"lisa_p99_ms,omitempty"`
	LisaP50Ratio float64 `json:"lisa_p50_floor_ratio,omitempty"`
	LisaP99Ratio float64 `json:"lisa_p99_floor_ratio,omitempty"`

	// StoreP50Ratio … StoreP99Ratio are the latency against the store
	// floor (floorReport.StoreFloorMs), the floor issue #18 judges by.
	StoreP50Ratio float64 `json:"p50_store_floor_ratio"`
	StoreP95Ratio float64 `json:"p95_store_floor_ratio"`
	StoreP99Ratio float64 `json:"p99_store_floor_ratio"`

	// FakesIsolated says the fake homeserver and the fake LLM ran in a
	// process of their own (fake homeserver only).
	FakesIsolated bool `json:"fakes_in_own_process,omitempty"`
	// CPU is the bench process's CPU over the measured invocations (fake
	// homeserver only).
	CPU *cpuReport `json:"cpu,omitempty"`

	samples, lisaSamples []time.Duration
}

// cpuReport is CPU time per measured invocation, and where it went.
type cpuReport struct {
	// LisaUsPerInvocation is the bench process's user + sys CPU over the
	// measured invocations ÷ invocations, in µs: Lisa's own when the
	// fakes run in their own process (plus the bench's driving of them:
	// one control request and one store read per invocation).
	LisaUsPerInvocation float64 `json:"lisa_us_per_invocation"`
	// LisaUserUs and LisaSysUs split it into user and system time.
	LisaUserUs float64 `json:"lisa_user_us_per_invocation"`
	LisaSysUs  float64 `json:"lisa_sys_us_per_invocation"`
	// FakesUsPerInvocation is the fakes' process's CPU likewise (0 when
	// they run in the bench process, where LisaUsPerInvocation holds it).
	FakesUsPerInvocation float64 `json:"fakes_us_per_invocation"`
	// Profile is the top of a CPU profile of the bench process over the
	// same invocations.
	Profile cpuBreakdown `json:"profile"`
}

// segmentStats is one part of the path between two observed requests.
type segmentStats struct {
	Name  string  `json:"name"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
}

// segmentNames name the parts of the path between the instants the fake
// homeserver and the fake LLM observe. Durable writes in series with the
// path are named; InvocationStarted and ReplyReady are written beside it
// (the room performs the attempt's start and the send before writing
// them: room.Output.Early).
var segmentNames = []string{
	"deliverable → /sync response written",
	"/sync response → GET /context or /joined_members, whichever is first (classify, CommitSync and InvocationQueued committed, nudge with the entries, slot, spawn, typing on)",
	"→ LLM request arrives (context and members side by side, context built, store synced (started beside the fetch), prompt encoded)",
	"LLM request → its answer written (the fake LLM's own handling, not Lisa's)",
	"LLM answer → reply PUT (answer decoded, rendered, journal sync awaited (done by then), send; ReplyReady committed beside it)",
}

// llmSegment is the index of the fake LLM's own handling in segmentNames.
const llmSegment = 3

// tracer records, per room, when the fake homeserver saw each request,
// and when the fake LLM received and answered each request.
type tracer struct {
	mu   sync.Mutex
	seen map[string][]tracePoint
	llm  []llmRound
}

type tracePoint struct {
	endpoint string
	at       time.Time
}

// llmRound is one chat completion as the fake LLM handled it.
type llmRound struct{ arrived, answered time.Time }

func (t *tracer) on(endpoint, room string, at time.Time) {
	t.mu.Lock()
	t.seen[room] = append(t.seen[room], tracePoint{endpoint, at})
	t.mu.Unlock()
}

func (t *tracer) onLLM(arrived, answered time.Time) {
	t.mu.Lock()
	t.llm = append(t.llm, llmRound{arrived, answered})
	t.mu.Unlock()
}

// take returns and forgets room's points and every LLM round so far (the
// latency phase runs one invocation at a time).
func (t *tracer) take(room string) ([]tracePoint, []llmRound) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pts, rounds := t.seen[room], t.llm
	delete(t.seen, room)
	t.llm = nil
	return pts, rounds
}

// segments splits [t0, send] at the first /sync after t0, the first of
// /context and /joined_members (Lisa sends both at once), the arrival and
// answer of the first LLM request after those, and the send; ok is false
// if one is missing.
func segments(t0 time.Time, pts []tracePoint, rounds []llmRound) ([]time.Duration, bool) {
	first := map[string]time.Time{}
	for _, p := range pts {
		if p.at.Before(t0) {
			continue
		}
		if _, ok := first[p.endpoint]; !ok {
			first[p.endpoint] = p.at
		}
	}
	ctxAt, membersAt := first["context"], first["joined_members"]
	if ctxAt.IsZero() || membersAt.IsZero() {
		return nil, false
	}
	fetch := ctxAt
	if membersAt.Before(fetch) {
		fetch = membersAt
	}
	var round llmRound
	for _, r := range rounds {
		if !r.arrived.Before(fetch) {
			round = r
			break
		}
	}
	marks := []time.Time{t0, first["sync"], fetch, round.arrived, round.answered, first["send"]}
	out := make([]time.Duration, 0, len(marks)-1)
	for i := 1; i < len(marks); i++ {
		if marks[i].IsZero() || marks[i].Before(marks[i-1]) {
			return nil, false
		}
		out = append(out, marks[i].Sub(marks[i-1]))
	}
	return out, true
}

// finish computes the percentiles and their ratios to the floor (bare
// fsync) and to the store floor (Badger commits).
func (l *latencyReport) finish(floorMs, storeFloorMs float64) {
	l.N = len(l.samples)
	l.P50Ms, l.P95Ms, l.P99Ms, l.MaxMs = pct(l.samples, 50), pct(l.samples, 95), pct(l.samples, 99), pct(l.samples, 100)
	if len(l.lisaSamples) > 0 {
		l.LisaP50Ms, l.LisaP99Ms = pct(l.lisaSamples, 50), pct(l.lisaSamples, 99)
	}
	if floorMs > 0 {
		l.P50Ratio, l.P95Ratio, l.P99Ratio = l.P50Ms/floorMs, l.P95Ms/floorMs, l.P99Ms/floorMs
		l.LisaP50Ratio, l.LisaP99Ratio = l.LisaP50Ms/floorMs, l.LisaP99Ms/floorMs
	}
	if storeFloorMs > 0 {
		l.StoreP50Ratio, l.StoreP95Ratio, l.StoreP99Ratio = l.P50Ms/storeFloorMs, l.P95Ms/storeFloorMs, l.P99Ms/storeFloorMs
	}
}

// throughputStats is invocations per second across many rooms.
type throughputStats struct {
	Rooms            int     `json:"rooms"`
	Invocations      int     `json:"invocations"`
	MaxConcurrent    int     `json:"max_concurrent_rooms"`
	Seconds          float64 `json:"seconds"`
	PerSecond        float64 `json:"per_second"`
	CeilingPerSecond float64 `json:"fsync_bound_ceiling_per_second"`
	CeilingRatio     float64 `json:"ceiling_ratio"`
}

const (
	benchBot    = "@lisa:bench.test"
	benchHuman  = "@ann:bench.test"
	benchDevice = "BENCH"
	// benchToken is the fake homeserver's only access token; it opens
	// nothing outside this process.
	benchToken = "bench-token"
)

// startFake starts a fake homeserver with n rooms named by prefix.
func startFake(n int, prefix string, w *arrivals, onRequest func(endpoint, room string, at time.Time)) (*fakehs.Server, []string, error) {
	hs := fakehs.New(fakehs.Options{UserID: benchBot, DeviceID: benchDevice, Token: benchToken,
		OnSend: func(s fakehs.Send) { w.deliver(inReplyTo(s.Content), s.At) }, OnRequest: onRequest})
	if err := hs.Listen(); err != nil {
		return nil, nil, err
	}
	rooms := make([]string, n)
	for i := range rooms {
		rooms[i] = fmt.Sprintf("!%s%05d:bench.test", prefix, i)
		hs.CreateRoom(rooms[i], map[string]string{benchHuman: "Ann"})
	}
	return hs, rooms, nil
}

// fakeStack is the in-process fake homeserver with its rooms and the
// instant scripted LLM that a bench phase runs Lisa against.
type fakeStack struct {
	hs    *fakehs.Server
	rooms []string
	llm   *llmfake.Server
}

// startFakeStack starts a fake homeserver with n rooms and the bench LLM.
func startFakeStack(n int, prefix string, w *arrivals, trace *tracer) (*fakeStack, error) {
	var onRequest func(endpoint, room string, at time.Time)
	var onLLM func(arrived, answered time.Time)
	if trace != nil {
		onRequest, onLLM = trace.on, trace.onLLM
	}
	hs, rooms, err := startFake(n, prefix, w, onRequest)
	if err != nil {
		return nil, err
	}
	llm, err := startBenchLLM(onLLM)
	if err != nil {
		hs.Close()
		return nil, err
	}
	return &fakeStack{hs: hs, rooms: rooms, llm: llm}, nil
}

// target is how Lisa reaches the fake homeserver.
func (f *fakeStack) target() benchTarget {
	return benchTarget{f.hs.URL(), benchBot, benchDevice, benchToken}
}

// Close stops the LLM and the homeserver.
func (f *fakeStack) Close() {
	f.llm.Close()
	f.hs.Close()
}

// benchFakeLatency measures bot-added latency through the fake
// homeserver, one invocation at a time, each posted while Lisa's /sync is
// parked so the mention is delivered at once. The fakes run in a process
// of their own unless o.fakesInProcess; this process's CPU over the
// measured invocations is Lisa's (see cpuReport).
func benchFakeLatency(ctx context.Context, work string, o benchOptions) (*latencyReport, error) {
	fakes, err := startLatencyFakes(ctx, max(1, o.latencyRooms), o.fakesInProcess)
	if err != nil {
		return nil, err
	}
	defer fakes.Close()
	rooms := fakes.roomIDs()
	lisa, err := startBenchLisa(ctx, work, fakes.target(), fakes.llmURL(), rooms, 3, o.logOut)
	if err != nil {
		return nil, err
	}
	defer lisa.stop()
	if err := lisa.d.AwaitBaseline(ctx, time.Minute); err != nil {
		return nil, err
	}
	for i := range o.warmup {
		if _, err := latencyStep(ctx, fakes, lisa, rooms[i%len(rooms)], i); err != nil {
			return nil, err
		}
	}
	rep := &latencyReport{FakesIsolated: !o.fakesInProcess,
		Measured: "deliverable = the fake homeserver stored the event while Lisa's /sync was parked; arrival = the reply PUT reached the fake, before its body was read"}
	before, err := fakes.counts(ctx)
	if err != nil {
		return nil, err
	}
	meter, err := startCPUMeter(ctx, fakes, o.latencyProfile)
	if err != nil {
		return nil, err
	}
	defer meter.stopProfile()
	segs := make([][]time.Duration, len(segmentNames))
	for i := o.warmup; i < o.warmup+o.invocations; i++ {
		res, err := latencyStep(ctx, fakes, lisa, rooms[i%len(rooms)], i)
		if err != nil {
			return nil, err
		}
		rep.samples = append(rep.samples, res.latency())
		if len(res.Segments) == len(segmentNames) {
			for k, d := range res.Segments {
				segs[k] = append(segs[k], time.Duration(d))
			}
			rep.lisaSamples = append(rep.lisaSamples, res.latency()-time.Duration(res.Segments[llmSegment]))
		}
	}
	if rep.CPU, err = meter.stop(ctx, o.invocations); err != nil {
		return nil, err
	}
	after, err := fakes.counts(ctx)
	if err != nil {
		return nil, err
	}
	rep.summarize(segs, before, after, o.invocations)
	return rep, nil
}

// startLatencyFakes starts the latency phase's fakes with n rooms, in a
// child process unless inProcess.
func startLatencyFakes(ctx context.Context, n int, inProcess bool) (latencyFakes, error) {
	if inProcess {
		return startLocalFakes(n, "lat")
	}
	return startFakesProcess(ctx, n, "lat")
}

// latencyStep runs invocation i in room and waits until Lisa's cursor has
// taken her reply, so that invocations do not overlap.
func latencyStep(ctx context.Context, fakes latencyFakes, lisa *benchLisa, room string, i int) (invokeResult, error) {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := fakes.invoke(wctx, room, i)
	if err != nil {
		return res, fmt.Errorf("invocation %d: %w", i, err)
	}
	if err := lisa.awaitSynced(wctx, room, res.ReplyID); err != nil {
		return res, fmt.Errorf("Lisa did not sync her reply: %w", err)
	}
	return res, nil
}

// summarize fills in the segments' percentiles and the homeserver calls
// per invocation, from the fake's counts before and after n invocations.
func (l *latencyReport) summarize(segs [][]time.Duration, before, after map[string]int, n int) {
	for k, name := range segmentNames {
		l.Segments = append(l.Segments, segmentStats{Name: name, P50Ms: pct(segs[k], 50), P99Ms: pct(segs[k], 99)})
	}
	l.CallsPerInvocation = map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 && n > 0 {
			l.CallsPerInvocation[k] = float64(d) / float64(n)
		}
	}
}

// benchThroughput posts perRoom mentions in each of o.rooms rooms at once
// and times until the last reply arrives.
func benchThroughput(ctx context.Context, work string, o benchOptions) (*throughputStats, error) {
	total := o.rooms * o.perRoom
	waiter := newArrivals(make(chan time.Time, total+16))
	stack, err := startFakeStack(o.rooms, "tp", waiter, nil)
	if err != nil {
		return nil, err
	}
	defer stack.Close()
	hs, rooms := stack.hs, stack.rooms
	lisa, err := startBenchLisa(ctx, work, stack.target(), stack.llm.URL(), rooms, o.maxConcurrent, o.logOut)
	if err != nil {
		return nil, err
	}
	defer lisa.stop()
	if err := lisa.d.AwaitBaseline(ctx, time.Minute); err != nil {
		return nil, err
	}
	if err := lisa.awaitRooms(ctx, rooms); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := hs.WaitParked(wctx); err != nil {
		return nil, err
	}
	var start time.Time
	for k := range o.perRoom {
		for i, room := range rooms {
			_, at, err := hs.Post(room, benchHuman, mention(benchBot, k*len(rooms)+i))
			if err != nil {
				return nil, err
			}
			if start.IsZero() {
				start = at
			}
		}
	}
	var last time.Time
	for n := range total {
		select {
		case at := <-waiter.all:
			if at.After(last) {
				last = at
			}
		case <-wctx.Done():
			return nil, fmt.Errorf("only %d of %d replies arrived", n, total)
		}
	}
	secs := last.Sub(start).Seconds()
	return &throughputStats{Rooms: o.rooms, Invocations: total, MaxConcurrent: o.maxConcurrent, Seconds: secs, PerSecond: float64(total) / secs}, nil
}

// benchDendriteLatency measures bot-added latency through a local
// Dendrite: deliverable = the human's send returned; arrival = Lisa put
// the reply PUT on the wire (Dendrite cannot report arrivals, so the
// homeserver's receive time is not included).
func benchDendriteLatency(ctx context.Context, work string, o benchOptions) (*latencyReport, error) {
	hs, err := dendrite.Launch(ctx, dendrite.Options{DataDir: filepath.Join(work, "dendrite")})
	if err != nil {
		return nil, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = hs.Stop(stopCtx)
	}()
	dr, err := setUpDendriteRoom(ctx, hs)
	if err != nil {
		return nil, err
	}
	llm, err := startBenchLLM(nil)
	if err != nil {
		return nil, err
	}
	defer llm.Close()
	lisaAcc := dr.lisa
	lisa, err := startBenchLisa(ctx, work, benchTarget{hs.URL(), lisaAcc.UserID, lisaAcc.DeviceID, lisaAcc.AccessToken}, llm.URL(), []string{string(dr.room)}, 3, o.logOut)
	if err != nil {
		return nil, err
	}
	defer lisa.stop()
	if err := lisa.d.AwaitBaseline(ctx, time.Minute); err != nil {
		return nil, err
	}
	rep := &latencyReport{Measured: "deliverable = Dendrite answered the human's send; arrival = Lisa put the reply PUT on the wire"}
	warm := min(o.warmup, 20)
	for i := range warm + o.dendriteInvocations {
		latency, err := dr.invoke(ctx, lisa, i)
		if err != nil {
			return nil, err
		}
		if i >= warm {
			rep.samples = append(rep.samples, latency)
		}
	}
	return rep, nil
}

// dendriteRoom is the room of the Dendrite latency bench: a human's
// private chat that Lisa joined.
type dendriteRoom struct {
	lisa  dendrite.Account
	human *mautrix.Client
	room  id.RoomID
}

// setUpDendriteRoom registers Lisa and a human on hs, and has the human
// create a private room that Lisa joins.
func setUpDendriteRoom(ctx context.Context, hs *dendrite.Server) (*dendriteRoom, error) {
	lisaAcc, err := hs.RegisterUser(ctx, "lisa", "lisa-password-1", benchDevice)
	if err != nil {
		return nil, err
	}
	humanAcc, err := hs.RegisterUser(ctx, "human", "human-password-1", "HUMANBENCH")
	if err != nil {
		return nil, err
	}
	human, err := mautrix.NewClient(hs.URL(), id.UserID(humanAcc.UserID), humanAcc.AccessToken)
	if err != nil {
		return nil, err
	}
	lisaCli, err := mautrix.NewClient(hs.URL(), id.UserID(lisaAcc.UserID), lisaAcc.AccessToken)
	if err != nil {
		return nil, err
	}
	created, err := human.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{id.UserID(lisaAcc.UserID)}})
	if err != nil {
		return nil, fmt.Errorf("create room: %w", matrix.Classify(err))
	}
	if _, err := lisaCli.JoinRoomByID(ctx, created.RoomID); err != nil {
		return nil, fmt.Errorf("lisa joins: %w", matrix.Classify(err))
	}
	return &dendriteRoom{lisa: lisaAcc, human: human, room: created.RoomID}, nil
}

// invoke sends invocation i as the human and returns the time from
// Dendrite answering the send to lisa putting her reply on the wire. It
// then gives Lisa time to take her reply through /sync.
func (dr *dendriteRoom) invoke(ctx context.Context, lisa *benchLisa, i int) (time.Duration, error) {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	content := &event.MessageEventContent{MsgType: event.MsgText, Body: fmt.Sprintf("Lisa, ping %d", i),
		Mentions: &event.Mentions{UserIDs: []id.UserID{id.UserID(dr.lisa.UserID)}}}
	resp, err := dr.human.SendMessageEvent(wctx, dr.room, event.EventMessage, content)
	at := time.Now()
	if err != nil {
		cancel()
		return 0, matrix.Classify(err)
	}
	reply := lisa.sends.expect(string(resp.EventID))
	var arrived time.Time
	select {
	case arrived = <-reply:
	case <-wctx.Done():
		cancel()
		return 0, fmt.Errorf("no reply to invocation %d within a minute", i)
	}
	cancel()
	room := string(dr.room)
	replyID, found, err := lisa.session.FindReply(ctx, room, string(resp.EventID), "")
	if err == nil && found {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = lisa.awaitSynced(sctx, room, replyID)
		cancel()
	}
	return arrived.Sub(at), nil
}
