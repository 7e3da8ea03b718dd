package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"syscall"
	"time"
)

// benchOptions are the sizes of one bench run. The defaults are the
// figures issue #8 asks for; tests use tiny ones.
type benchOptions struct {
	invocations         int // latency samples through the fake homeserver
	warmup              int // unmeasured invocations before them
	latencyRooms        int // rooms the latency samples rotate through
	dendrite            bool
	dendriteInvocations int
	rooms               int // throughput: rooms
	perRoom             int // throughput: mentions per room
	maxConcurrent       int
	idleRooms           int // scale: idle allowed rooms
	journalEvents       int // scale: journal events on disk at start
	fsyncs, rtts        int // floor samples
	jsonPath            string
	heapProfile         string // write a heap profile with the idle rooms running
	cpuProfile          string // profile the throughput phase
	startProfile        string // profile the start-up with journals
	latencyProfile      string // profile the fake-homeserver latency phase
	fakesInProcess      bool   // run the latency phase's fakes in the bench process
	trace               string // execution trace of the fake-homeserver latency phase
	prefixInvocations   int    // prompt prefix: invocations in the lived-in room
	prefixBetween       int    // prompt prefix: messages of others before each
	prefixStep          int    // prompt prefix: context.window_step_events (0: the default)
	logOut              io.Writer
}

// benchReport is the whole result; its JSON form is the machine-readable
// report.
type benchReport struct {
	Machine    machineInfo      `json:"machine"`
	Floor      floorReport      `json:"floor"`
	Fake       *latencyReport   `json:"latency_fake_homeserver,omitempty"`
	Dendrite   *latencyReport   `json:"latency_dendrite,omitempty"`
	Throughput *throughputStats `json:"throughput,omitempty"`
	Scale      *scaleReport     `json:"scale,omitempty"`
	Prefix     *prefixReport    `json:"prompt_prefix,omitempty"`
	Targets    []targetResult   `json:"targets"`
}

// machineInfo says where the figures come from.
type machineInfo struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	MemoryGiB int    `json:"memory_gib"`
	OS        string `json:"os"`
	Go        string `json:"go"`
	Commit    string `json:"commit"`
	StartedAt string `json:"started_at"`
}

// targetResult is one acceptance target of issue #8.
type targetResult struct {
	Name   string `json:"name"`
	Target string `json:"target"`
	Value  string `json:"value"`
	Met    bool   `json:"met"`
}

// Exit codes, as lisa's.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	if spec, ok := os.LookupEnv(fakesEnv); ok {
		os.Exit(runFakesChild(spec, os.Stdin, os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := bench(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// bench measures Lisa against the physical floor of this machine and
// prints the report (docs/performance.md).
func bench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lisa-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := benchOptions{logOut: io.Discard}
	fs.IntVar(&o.invocations, "invocations", 1000, "latency samples through the fake homeserver")
	fs.IntVar(&o.warmup, "warmup", 50, "unmeasured invocations before the latency samples")
	fs.IntVar(&o.latencyRooms, "latency-rooms", 10, "rooms the latency samples rotate through")
	fs.BoolVar(&o.dendrite, "dendrite", true, "also measure latency through a local Dendrite")
	fs.IntVar(&o.dendriteInvocations, "dendrite-invocations", 1000, "latency samples through Dendrite")
	fs.IntVar(&o.rooms, "rooms", 1000, "throughput: rooms receiving mentions at once")
	fs.IntVar(&o.perRoom, "per-room", 2, "throughput: mentions per room")
	fs.IntVar(&o.maxConcurrent, "max-concurrent", 64, "runtime.max_concurrent_rooms for the throughput phase")
	fs.IntVar(&o.idleRooms, "idle-rooms", 10_000, "scale: idle allowed rooms")
	fs.IntVar(&o.journalEvents, "journal-events", 1_000_000, "scale: journal events on disk at start")
	fs.IntVar(&o.fsyncs, "fsyncs", 500, "floor: fsync samples")
	fs.IntVar(&o.rtts, "rtts", 2000, "floor: loopback round-trip samples")
	fs.StringVar(&o.jsonPath, "json", "", "also write the JSON report to this file")
	fs.StringVar(&o.cpuProfile, "cpu-profile", "", "write a CPU profile of the throughput phase to this file")
	fs.StringVar(&o.latencyProfile, "latency-cpu-profile", "", "write the CPU profile of the fake-homeserver latency phase's measured invocations to this file")
	fs.BoolVar(&o.fakesInProcess, "fakes-in-process", false, "run the latency phase's fake homeserver and fake LLM in the bench process (their CPU then counts as Lisa's)")
	fs.StringVar(&o.trace, "trace", "", "write a runtime execution trace of the fake-homeserver latency phase to this file (go tool trace)")
	fs.StringVar(&o.startProfile, "start-cpu-profile", "", "write a CPU profile of the start-up with journals (scale phase) to this file")
	fs.StringVar(&o.heapProfile, "heap-profile", "", "write a heap profile to this file while the idle rooms run")
	fs.IntVar(&o.prefixInvocations, "prefix-invocations", 50, "prompt prefix: invocations in a lived-in room")
	fs.IntVar(&o.prefixBetween, "prefix-between", 3, "prompt prefix: messages of others before each invocation")
	fs.IntVar(&o.prefixStep, "prefix-step", 0, "prompt prefix: context.window_step_events (0 keeps the default)")
	verbose := fs.Bool("v", false, "show Lisa's warnings and errors on stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "lisa-bench: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *verbose {
		o.logOut = stderr
	}
	rep, err := runBench(ctx, o, stderr)
	if rep != nil {
		printBench(stdout, rep)
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintf(stdout, "\n%s\n", b)
		if o.jsonPath != "" {
			if werr := os.WriteFile(o.jsonPath, append(b, '\n'), 0o644); werr != nil && err == nil {
				err = werr
			}
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "lisa-bench:", err)
		return exitFailure
	}
	return exitOK
}

// runBench runs every phase in order. It returns what it measured even
// when a phase fails.
func runBench(ctx context.Context, o benchOptions, progress io.Writer) (*benchReport, error) {
	work, err := os.MkdirTemp("", "lisa-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	rep := &benchReport{Machine: describeMachine()}
	step := func(format string, a ...any) { fmt.Fprintf(progress, "[bench] "+format+"\n", a...) }

	step("floor: fsync in %s, loopback HTTP round trips", work)
	probe, err := dataDirProbe(work)
	if err != nil {
		return rep, err
	}
	if rep.Floor, err = measureFloor(probe, o.fsyncs, o.rtts); err != nil {
		return rep, fmt.Errorf("floor: %w", err)
	}
	if o.invocations > 0 {
		step("latency through the fake homeserver: %d invocations (+%d warm-up)", o.invocations, o.warmup)
		stopTrace, err := startTrace(o.trace)
		if err != nil {
			return rep, err
		}
		lr, err := benchFakeLatency(ctx, filepath.Join(work, "fake"), o)
		stopTrace()
		if err != nil {
			return rep, fmt.Errorf("fake-homeserver latency: %w", err)
		}
		lr.finish(rep.Floor.FloorMs, rep.Floor.StoreFloorMs)
		rep.Fake = lr
	}
	if o.rooms > 0 && o.perRoom > 0 {
		step("throughput: %d rooms × %d mentions through the fake homeserver", o.rooms, o.perRoom)
		stopProfile, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			return rep, err
		}
		tr, err := benchThroughput(ctx, filepath.Join(work, "throughput"), o)
		stopProfile()
		if err != nil {
			return rep, fmt.Errorf("throughput: %w", err)
		}
		tr.CeilingPerSecond = rep.Floor.CeilingPerSecond
		tr.CeilingRatio = tr.PerSecond / rep.Floor.CeilingPerSecond
		rep.Throughput = tr
	}
	if o.idleRooms > 0 {
		step("scale: RSS with %d idle rooms; ready time with %d journal events", o.idleRooms, o.journalEvents)
		sr, err := benchScale(ctx, filepath.Join(work, "scale"), o, step)
		if err != nil {
			return rep, fmt.Errorf("scale: %w", err)
		}
		rep.Scale = sr
	}
	if o.prefixInvocations > 1 {
		step("prompt prefix: %d invocations in a lived-in room, %d messages between", o.prefixInvocations, o.prefixBetween)
		pr, err := benchPrefix(ctx, prefixWork(work), o)
		if err != nil {
			return rep, fmt.Errorf("prompt prefix: %w", err)
		}
		rep.Prefix = pr
	}
	if o.dendrite && o.dendriteInvocations > 0 {
		step("latency through Dendrite: %d invocations (the first run builds Dendrite)", o.dendriteInvocations)
		lr, err := benchDendriteLatency(ctx, filepath.Join(work, "dendrite"), o)
		if err != nil {
			return rep, fmt.Errorf("dendrite latency: %w", err)
		}
		lr.finish(rep.Floor.FloorMs, rep.Floor.StoreFloorMs)
		rep.Dendrite = lr
	}
	rep.Targets = targets(rep)
	return rep, nil
}

// startCPUProfile profiles the process into path until the returned
// function is called; an empty path profiles nothing.
func startCPUProfile(path string) (func(), error) {
	return startRecording(path, pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// startTrace writes a runtime execution trace into path until the
// returned function is called; an empty path traces nothing.
func startTrace(path string) (func(), error) {
	return startRecording(path, trace.Start, trace.Stop)
}

// startRecording runs start on a new file at path and returns what stops
// the recording and closes the file; an empty path records nothing.
func startRecording(path string, start func(io.Writer) error, stop func()) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { stop(); _ = f.Close() }, nil
}

// targets evaluates the acceptance targets of issues #8, #18 and #19 on
// what was measured. Latency is judged against the store floor (#18).
func targets(r *benchReport) []targetResult {
	var out []targetResult
	if f := r.Fake; f != nil {
		out = append(out,
			targetResult{"latency p50 (fake homeserver)", "≤ 2× store floor", fmt.Sprintf("%.2f× (%.2f ms, store floor %.2f ms)", f.StoreP50Ratio, f.P50Ms, r.Floor.StoreFloorMs), f.StoreP50Ratio <= 2},
			targetResult{"latency p99 (fake homeserver)", "≤ 5× store floor", fmt.Sprintf("%.2f× (%.2f ms)", f.StoreP99Ratio, f.P99Ms), f.StoreP99Ratio <= 5},
			targetResult{"latency p50, absolute", "≤ 2.5 ms", fmt.Sprintf("%.2f ms", f.P50Ms), f.P50Ms <= 2.5},
		)
	}
	if t := r.Throughput; t != nil {
		bar := min(1000, 0.8*t.CeilingPerSecond)
		out = append(out, targetResult{"throughput", fmt.Sprintf("≥ min(1000/s, 80%% of ceiling %.0f/s) = %.0f/s", t.CeilingPerSecond, bar),
			fmt.Sprintf("%.0f/s (%.0f%% of ceiling)", t.PerSecond, 100*t.CeilingRatio), t.PerSecond >= bar})
	}
	if s := r.Scale; s != nil {
		out = append(out,
			targetResult{"RSS per idle room", "≤ 4 KiB", fmt.Sprintf("%.2f KiB at %d rooms", s.RSSPerRoomKiB, s.IdleRooms), s.RSSPerRoomKiB <= 4},
			targetResult{"ready time", "≤ 1 s", fmt.Sprintf("%.3f s to first answer (%d rooms, %d journal events; all rooms live after %.3f s)", s.ReadySeconds, s.ReadyRooms, s.JournalEvents, s.AllLiveSeconds), s.ReadySeconds <= 1},
		)
		out = append(out, startupTargets(s.Startup)...)
	}
	if p := r.Prefix; p != nil {
		out = append(out, targetResult{"shared prompt prefix (#30)", "≥ 90 % of successive requests' bytes",
			fmt.Sprintf("%.1f %% over %d requests (%d start moves)", 100*p.SharedFraction, p.Requests, p.StartMoves), p.SharedFraction >= 0.9})
	}
	return out
}

// printBench prints the human-readable table.
func printBench(w io.Writer, r *benchReport) {
	m := r.Machine
	fmt.Fprintf(w, "Lisa bench — %s, %d cores, %d GiB, %s, %s, commit %s\n\n", m.CPU, m.Cores, m.MemoryGiB, m.OS, m.Go, m.Commit)
	printFloor(w, r.Floor)
	printLatency(w, "bot-added latency, fake homeserver", r.Fake, r.Floor)
	printLatency(w, "bot-added latency, Dendrite", r.Dendrite, r.Floor)
	printRest(w, r)
}

// printFloor prints the floor block.
func printFloor(w io.Writer, f floorReport) {
	fmt.Fprintf(w, "%-44s %s\n", "floor", "")
	fmt.Fprintf(w, "  %-42s p50 %.3f ms  p99 %.3f ms  (%.0f/s)\n", "fsync (data dir)", f.FsyncP50Ms, f.FsyncP99Ms, f.FsyncPerSecond)
	fmt.Fprintf(w, "  %-42s p50 %.3f ms  p99 %.3f ms\n", "loopback HTTP round trip", f.RTTP50Ms, f.RTTP99Ms)
	fmt.Fprintf(w, "  %-42s %d fsync × %.3f + %d RTT × %.3f = %.3f ms\n", "latency floor", f.DurableWritesOnPath, f.FsyncP50Ms, f.CallsOnPath, f.RTTP50Ms, f.FloorMs)
	fmt.Fprintf(w, "  %-42s %.0f fsync/s ÷ %d writes = %.0f inv/s\n", "fsync-bound ceiling", f.FsyncPerSecond, f.DurableWritesPerInvocation, f.CeilingPerSecond)
	fmt.Fprintf(w, "  %-42s p50 %.3f ms  p99 %.3f ms  (%.1f× fsync)\n", "durable write (Lisa's store: commit + sync)", f.BadgerWriteP50Ms, f.BadgerWriteP99Ms, f.BadgerWriteP50Ms/f.FsyncP50Ms)
	fmt.Fprintf(w, "  %-42s %d commit × %.3f + %d RTT × %.3f = %.3f ms\n", "store floor", f.DurableWritesOnPath, f.BadgerWriteP50Ms, f.CallsOnPath, f.RTTP50Ms, f.StoreFloorMs)
}

// printLatency prints one latency block; nil prints nothing.
func printLatency(w io.Writer, name string, l *latencyReport, f floorReport) {
	if l == nil {
		return
	}
	where := ""
	if l.FakesIsolated {
		where = ", fakes in their own process"
	}
	fmt.Fprintf(w, "%s (n=%d%s)\n", name, l.N, where)
	fmt.Fprintf(w, "  %-42s %.2f / %.2f / %.2f ms\n", "p50 / p95 / p99", l.P50Ms, l.P95Ms, l.P99Ms)
	fmt.Fprintf(w, "  %-42s %.2f× / %.2f× / %.2f×\n", "÷ floor", l.P50Ratio, l.P95Ratio, l.P99Ratio)
	if f.StoreFloorMs > 0 {
		fmt.Fprintf(w, "  %-42s %.2f× / %.2f× / %.2f×\n", "÷ store floor", l.StoreP50Ratio, l.StoreP95Ratio, l.StoreP99Ratio)
	}
	if l.LisaP50Ms > 0 {
		fmt.Fprintf(w, "  %-42s %.2f / %.2f ms = %.2f× / %.2f× floor\n", "p50 / p99 without the fake LLM's handling", l.LisaP50Ms, l.LisaP99Ms, l.LisaP50Ratio, l.LisaP99Ratio)
	}
	for _, sg := range l.Segments {
		fmt.Fprintf(w, "    %-68s p50 %6.2f  p99 %6.2f ms\n", sg.Name, sg.P50Ms, sg.P99Ms)
	}
	if c := l.CPU; c != nil {
		fmt.Fprintf(w, "  %-42s %.0f µs = %.0f user + %.0f sys (fakes' process: %.0f µs)\n", "Lisa's CPU per invocation",
			c.LisaUsPerInvocation, c.LisaUserUs, c.LisaSysUs, c.FakesUsPerInvocation)
		fmt.Fprintf(w, "    CPU profile, %d samples (%.0f µs per invocation): top 10 flat\n", c.Profile.Samples, c.Profile.SampledUsPerInvocation)
		for _, fn := range c.Profile.Flat {
			fmt.Fprintf(w, "      %5.1f%%  %s\n", fn.Percent, fn.Name)
		}
		fmt.Fprintf(w, "    top 10 cumulative\n")
		for _, fn := range c.Profile.Cum {
			fmt.Fprintf(w, "      %5.1f%%  %s\n", fn.Percent, fn.Name)
		}
	}
}

// printRest prints throughput, scale, start-up and the targets.
func printRest(w io.Writer, r *benchReport) {
	if t := r.Throughput; t != nil {
		fmt.Fprintf(w, "throughput (%d rooms, %d invocations, max_concurrent_rooms %d)\n", t.Rooms, t.Invocations, t.MaxConcurrent)
		fmt.Fprintf(w, "  %-42s %.0f inv/s in %.2f s (%.0f%% of ceiling %.0f/s)\n", "invocations per second", t.PerSecond, t.Seconds, 100*t.CeilingRatio, t.CeilingPerSecond)
	}
	if s := r.Scale; s != nil {
		fmt.Fprintf(w, "scale\n")
		fmt.Fprintf(w, "  %-42s %.2f KiB RSS, %.2f KiB Go heap (%d rooms)\n", "per idle allowed room", s.RSSPerRoomKiB, s.HeapPerRoomKiB, s.IdleRooms)
		fmt.Fprintf(w, "  %-42s %.3f s (%d rooms, %d journal events; daemon started after %.3f s)\n", "start to first answer (ready)", s.ReadySeconds, s.ReadyRooms, s.JournalEvents, s.StartSeconds)
		fmt.Fprintf(w, "  %-42s %.3f s (%d events replayed)\n", "start to every room replayed", s.AllLiveSeconds, s.ReplayedEvents)
		fmt.Fprintf(w, "  %-42s %.3f s (every room read back once)\n", "start to first answer after a crash", s.ReadyAfterCrashSeconds)
		fmt.Fprintf(w, "  %-42s %.1f MiB Go heap, %.1f KiB per room, %.0f bytes per event (%d rooms × %d events)\n", "event trail, full rings",
			float64(s.Trail.HeapKiB)/1024, s.Trail.RoomKiB, s.Trail.EventB, s.Trail.Rooms, s.Trail.PerRoom)
		printStartup(w, s.Startup)
	}
	if p := r.Prefix; p != nil {
		fmt.Fprintf(w, "prompt prefix (%d invocations, %d messages between, max_events %d, window_step_events %d)\n", p.Invocations, p.MessagesBetween, p.MaxEvents, p.WindowStepEvents)
		fmt.Fprintf(w, "  %-42s %.1f %% (median %.1f %%, p10 %.1f %%, least %.1f %%; %d start moves; %d bytes per request)\n", "shared with the previous request",
			100*p.SharedFraction, 100*p.P50Fraction, 100*p.P10Fraction, 100*p.MinFraction, p.StartMoves, p.MeanRequestBytes)
	}
	if len(r.Targets) > 0 {
		fmt.Fprintf(w, "targets (issues #8, #19, #30)\n")
		for _, t := range r.Targets {
			mark := "MET"
			if !t.Met {
				mark = "NOT MET"
			}
			fmt.Fprintf(w, "  %-7s %-32s %-44s %s\n", mark, t.Name, t.Target, t.Value)
		}
	}
}

// describeMachine collects the machine, Go version and commit.
func describeMachine() machineInfo {
	m := machineInfo{Cores: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version(),
		Commit: "unknown", CPU: "unknown", StartedAt: time.Now().UTC().Format(time.RFC3339)}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		_ = f.Close()
	}
	if kib, err := procField("/proc/meminfo", "MemTotal:"); err == nil {
		m.MemoryGiB = int((kib + 512*1024) / (1024 * 1024))
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			m.Commit = shortRev(rev, dirty)
		}
	}
	if m.Commit == "unknown" {
		// `go run` does not stamp the revision; ask git if it is there.
		if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
			dirty := false
			if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
				dirty = len(strings.TrimSpace(string(st))) > 0
			}
			m.Commit = shortRev(strings.TrimSpace(string(out)), dirty)
		}
	}
	return m
}

func shortRev(rev string, dirty bool) string {
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// procField reads a "Name: value kB" field from a /proc file, in KiB.
func procField(path, name string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name); ok {
			var n int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d", &n); err != nil {
				return 0, err
			}
			return n, nil
		}
	}
	return 0, errors.New("bench: " + name + " not found in " + path)
}
