package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/persistence"
)

// floorReport is the physical floor measured in the same run.
type floorReport struct {
	// FsyncP50Ms is the median latency of a small write plus fsync in the
	// data directory's file system.
	FsyncP50Ms float64 `json:"fsync_p50_ms"`
	FsyncP99Ms float64 `json:"fsync_p99_ms"`
	// FsyncPerSecond is sequential fsyncs per second (1 / mean).
	FsyncPerSecond float64 `json:"fsync_per_second"`
	// RTTP50Ms is the median loopback HTTP round trip (keep-alive, small
	// JSON body).
	RTTP50Ms float64 `json:"loopback_rtt_p50_ms"`
	RTTP99Ms float64 `json:"loopback_rtt_p99_ms"`
	// DurableWritesOnPath are the synchronous Badger commits between a
	// mention becoming deliverable and the reply's PUT.
	DurableWritesOnPath int `json:"durable_writes_on_path"`
	// CallsOnPath are the homeserver and LLM requests on that path.
	CallsOnPath int `json:"calls_on_path"`
	// DurableWritesPerInvocation are all synchronous commits an invocation
	// causes, including those after its reply was sent.
	DurableWritesPerInvocation int `json:"durable_writes_per_invocation"`
	// FloorMs = fsync p50 × writes on path + RTT p50 × calls on path.
	FloorMs float64 `json:"floor_ms"`
	// BadgerWriteP50Ms is the median of one durable write through Lisa's
	// store, opened as Lisa opens it (persistence.OpenBadger: group
	// commit, the log synced after the commit), in the same file system
	// as the data directories: a journal append and a Sync, one at a
	// time. It is what a durable write costs Lisa, as opposed to a bare
	// fsync: Badger's sync msyncs its write-ahead log and syncs its value
	// log.
	BadgerWriteP50Ms float64 `json:"badger_write_p50_ms"`
	BadgerWriteP99Ms float64 `json:"badger_write_p99_ms"`
	// StoreFloorMs = Badger write p50 × writes on path + RTT p50 × calls
	// on path: the floor with the store the architecture prescribes. The
	// latency above it is Lisa's own work.
	StoreFloorMs float64 `json:"store_floor_ms"`
	// CeilingPerSecond = fsyncs per second ÷ durable writes per invocation.
	CeilingPerSecond float64 `json:"fsync_bound_ceiling_per_second"`
}

// Writes and calls on the path of one invocation, counted from the code
// (docs/performance.md lists them). The store commits journal events
// without waiting for a sync of the log (persistence.groupCommit: every
// commit survives a process kill; a sync makes it survive power loss),
// and the room performs slot requests, attempt starts and fresh answers
// before writing the step's journal events (room.Output.Early):
//
//	durable writes on the path: one sync, which the first LLM request
//	waits for (invocation.WithDurability). CommitSync (cursor + inbox
//	entry) and InvocationQueued are committed in series (about a tenth
//	of a durable write each) but not synced; recording
//	InvocationStarted starts the sync while the attempt fetches its
//	context, so it overlaps the context fetch and is counted here once
//	all the same. The PUT waits for the journal to be synced up to the
//	send's decision (a barrier: done by then). ReplyReady is committed
//	while the PUT is on its way. After the PUT: ReplySent,
//	RecordBotEvent, and the next sync's CommitSync carrying Lisa's own
//	reply, synced by the timer or the next durable write.
//
//	syncs per invocation: the one started with the attempt (it covers
//	the mention's CommitSync), the one the send may add, and the one
//	after the reply's echo. Under load, concurrent rooms share them.
//
//	calls in series before the reply PUT: the /sync response, GET /context
//	(GET /joined_members runs beside it), the LLM request, and the PUT
//	itself. Typing on and typing off run beside them. The /sync response
//	and the PUT are one-way each (the /sync was parked; the arrival is
//	the PUT reaching the homeserver), so counting them as round trips
//	makes the floor higher by one RTT.
const (
	durableWritesOnPath        = 1
	durableWritesPerInvocation = 3
	callsOnPath                = 4
)

// measureFloor measures fsync latency in dir and loopback HTTP RTT.
func measureFloor(dir string, fsyncs, rtts int) (floorReport, error) {
	var fr floorReport
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return fr, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 512)
	var ds []time.Duration
	var total time.Duration
	for range fsyncs {
		start := time.Now()
		if _, err := f.Write(buf); err != nil {
			return fr, err
		}
		if err := f.Sync(); err != nil {
			return fr, err
		}
		d := time.Since(start)
		total += d
		ds = append(ds, d)
	}
	fr.FsyncP50Ms, fr.FsyncP99Ms = pct(ds, 50), pct(ds, 99)
	fr.FsyncPerSecond = float64(fsyncs) / total.Seconds()

	rtt, err := measureRTT(rtts)
	if err != nil {
		return fr, err
	}
	fr.RTTP50Ms, fr.RTTP99Ms = pct(rtt, 50), pct(rtt, 99)
	fr.DurableWritesOnPath, fr.CallsOnPath, fr.DurableWritesPerInvocation = durableWritesOnPath, callsOnPath, durableWritesPerInvocation
	fr.FloorMs = fr.FsyncP50Ms*durableWritesOnPath + fr.RTTP50Ms*callsOnPath
	fr.CeilingPerSecond = fr.FsyncPerSecond / durableWritesPerInvocation
	bw, err := measureBadgerWrites(dir, fsyncs)
	if err != nil {
		return fr, err
	}
	fr.BadgerWriteP50Ms, fr.BadgerWriteP99Ms = pct(bw, 50), pct(bw, 99)
	fr.StoreFloorMs = fr.BadgerWriteP50Ms*durableWritesOnPath + fr.RTTP50Ms*callsOnPath
	return fr, nil
}

// measureBadgerWrites times n sequential durable writes to a fresh store
// in dir: a journal append and a Sync each, with nothing else writing.
func measureBadgerWrites(dir string, n int) ([]time.Duration, error) {
	sub, err := os.MkdirTemp(dir, "badger-probe-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(sub)
	store, err := persistence.OpenBadger(sub, persistence.BadgerOptions{})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	ev := &roompb.InvocationStarted{EventId: "$probe:bench", Attempt: 1, StartedAtMs: 1}
	ds := make([]time.Duration, 0, n)
	for i := range n + 20 {
		start := time.Now()
		if err := store.AppendEvent("bench/probe", uint64(i), ev); err != nil {
			return nil, err
		}
		if err := store.Sync(); err != nil {
			return nil, err
		}
		if i >= 20 { // the first ones create files
			ds = append(ds, time.Since(start))
		}
	}
	return ds, store.Close()
}

// measureRTT times n keep-alive HTTP requests to a loopback server that
// answers with a small JSON body.
func measureRTT(n int) ([]time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"event_id":"$x"}`))
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close(); <-done }()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	url := "http://" + ln.Addr().String() + "/"
	var ds []time.Duration
	for i := range n + 50 {
		start := time.Now()
		resp, err := client.Get(url)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if i >= 50 { // the first ones warm the connection up
			ds = append(ds, time.Since(start))
		}
	}
	return ds, nil
}

// pct returns the p-th percentile of ds in milliseconds (nearest rank).
func pct(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	i = max(0, min(i, len(s)-1))
	return float64(s[i]) / float64(time.Millisecond)
}

// dataDirProbe returns a directory on the same file system as the data
// directories the bench uses.
func dataDirProbe(work string) (string, error) {
	dir := filepath.Join(work, "fsync-probe")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	return dir, nil
}
