package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/actors/room"
)

// TestMain lets the test binary be the bench's fakes child process, as
// the bench binary is (see runFakesChild).
func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(fakesEnv); ok {
		os.Exit(runFakesChild(spec, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestBenchReportIsWellFormed runs the bench command with tiny sizes and
// checks the report's shape, never its timings.
func TestBenchReportIsWellFormed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	var stdout, stderr bytes.Buffer
	code := bench(ctx, []string{"-invocations", "5", "-warmup", "1", "-latency-rooms", "2", "-dendrite=false",
		"-rooms", "4", "-per-room", "2", "-idle-rooms", "20", "-journal-events", "400", "-fsyncs", "10", "-rtts", "20",
		"-prefix-invocations", "4", "-research-invocations", "1", "-research-model-ms", "20", "-json", jsonPath}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"latency floor", "fsync-bound ceiling", "bot-added latency, fake homeserver (n=5, fakes in their own process)", "store floor", "÷ store floor",
		"Lisa's CPU per invocation", "top 10 flat", "top 10 cumulative",
		"throughput (4 rooms, 8 invocations", "per idle allowed room", "start to first answer (ready)", "start to every room replayed", "targets (docs/performance.md", "goal ", "guard ", "prompt prefix (4 invocations", "shared prompt prefix (#30)", "start-up, worst shape", "after a crash",
		"research (pages [300 500 800] ms, model 20 ms × 3 requests", "max_parallel_tool_calls = 4", "max_parallel_tool_calls = 1", "research answer (#27)"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
	if strings.Contains(stdout.String()+stderr.String(), benchToken) {
		t.Error("the access token appears in the output")
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Machine struct {
			Go, Commit string
			Cores      int
		}
		Floor struct {
			FloorMs      float64 `json:"floor_ms"`
			BadgerP50Ms  float64 `json:"badger_write_p50_ms"`
			BadgerP99Ms  float64 `json:"badger_write_p99_ms"`
			StoreFloorMs float64 `json:"store_floor_ms"`
			Writes       int     `json:"durable_writes_on_path"`
		}
		Fake *struct {
			N             int
			P50Ms         float64 `json:"p50_ms"`
			StoreP50Ratio float64 `json:"p50_store_floor_ratio"`
			StoreP99Ratio float64 `json:"p99_store_floor_ratio"`
			Isolated      bool    `json:"fakes_in_own_process"`
			Segments      []struct{ Name string }
			CPU           *struct {
				Lisa    float64 `json:"lisa_us_per_invocation"`
				Fakes   float64 `json:"fakes_us_per_invocation"`
				Profile struct {
					Samples int
					Flat    []funcShare `json:"top_flat"`
					Cum     []funcShare `json:"top_cumulative"`
				}
			}
		} `json:"latency_fake_homeserver"`
		Dendrite   *json.RawMessage `json:"latency_dendrite"`
		Throughput *struct{ Invocations int }
		Scale      *struct {
			IdleRooms      int `json:"idle_rooms"`
			JournalEvents  int `json:"journal_events"`
			ReplayedEvents int `json:"replayed_events"`
			Startup        []struct {
				Shape          string
				EventsPerRoom  int          `json:"events_per_room"`
				ReplayedEvents int          `json:"replayed_events"`
				Clean          startFigures `json:"clean_stop"`
				Crash          startFigures
			} `json:"startup"`
		}
		Research *struct {
			FloorMs    float64         `json:"floor_ms"`
			SumFloorMs float64         `json:"sequential_floor_ms"`
			Converter  string          `json:"converter"`
			Parallel   researchFigures `json:"parallel"`
			Sequential researchFigures `json:"sequential"`
		} `json:"research"`
		Targets []struct{ Name, Kind string }
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	switch {
	case rep.Machine.Go == "" || rep.Machine.Commit == "" || rep.Machine.Cores < 1:
		t.Errorf("machine = %+v", rep.Machine)
	case rep.Floor.FloorMs <= 0 || rep.Floor.BadgerP50Ms <= 0 || rep.Floor.BadgerP99Ms < rep.Floor.BadgerP50Ms || rep.Floor.StoreFloorMs <= 0 || rep.Floor.Writes != durableWritesOnPath:
		t.Errorf("floor = %+v", rep.Floor)
	case rep.Fake == nil || rep.Fake.N != 5 || rep.Fake.P50Ms <= 0 || !rep.Fake.Isolated:
		t.Errorf("fake latency = %+v", rep.Fake)
	case rep.Fake.StoreP50Ratio <= 0 || rep.Fake.StoreP99Ratio < rep.Fake.StoreP50Ratio || len(rep.Fake.Segments) != len(segmentNames):
		t.Errorf("fake latency ratios and segments = %+v", rep.Fake)
	case rep.Fake.CPU == nil || rep.Fake.CPU.Lisa <= 0 || rep.Fake.CPU.Fakes <= 0:
		t.Errorf("CPU per invocation = %+v", rep.Fake.CPU)
	case len(rep.Fake.CPU.Profile.Flat) > 10 || len(rep.Fake.CPU.Profile.Cum) > 10 || len(rep.Fake.CPU.Profile.Cum) < len(rep.Fake.CPU.Profile.Flat):
		t.Errorf("CPU profile top = %+v", rep.Fake.CPU.Profile)
	case rep.Dendrite != nil:
		t.Error("Dendrite latency reported though disabled")
	case rep.Throughput == nil || rep.Throughput.Invocations != 8:
		t.Errorf("throughput = %+v", rep.Throughput)
	case rep.Scale == nil || rep.Scale.IdleRooms != 20 || rep.Scale.JournalEvents != 400 || rep.Scale.ReplayedEvents <= 0:
		t.Errorf("scale = %+v", rep.Scale)
	case len(rep.Scale.Startup) != 2 || rep.Scale.Startup[0].EventsPerRoom != 20 || rep.Scale.Startup[1].EventsPerRoom != 49:
		t.Errorf("start-up shapes = %+v", rep.Scale.Startup)
	case rep.Research == nil || rep.Research.FloorMs != 860 || rep.Research.SumFloorMs != 1660 || rep.Research.Converter == "":
		t.Errorf("research = %+v", rep.Research)
	case rep.Research.Parallel.Parallel != 4 || rep.Research.Sequential.Parallel != 1:
		t.Errorf("research runs = %+v", rep.Research)
	case len(rep.Targets) != 10: // docs/performance.md's goals and guards (#27) and the shared prompt prefix (#30)
		t.Errorf("targets = %+v", rep.Targets)
	}
	kinds := map[string]int{}
	for _, tg := range rep.Targets {
		kinds[tg.Kind]++
	}
	if kinds[kindGoal] != 6 || kinds[kindGuard] != 4 || len(kinds) != 2 {
		t.Errorf("target kinds = %v, want 6 goals and 4 guards", kinds)
	}
	if rr := rep.Research; rr != nil {
		for _, run := range []researchFigures{rr.Parallel, rr.Sequential} {
			// Timings are not judged here, only that each invocation did
			// its work: three pages, three model requests.
			if run.N != 1 || run.P50Ms <= 0 || run.Ratio <= 0 || run.LisaCPU <= 0 || run.PageRequests != 3 || run.ModelRequests != 3 ||
				len(run.Segments) != len(researchSegmentNames) {
				t.Errorf("research run = %+v", run)
			}
		}
	}
	for _, sr := range rep.Scale.Startup {
		for _, run := range []startFigures{sr.Clean, sr.Crash} {
			if sr.ReplayedEvents <= 0 || run.FirstAnswer <= 0 || run.AllLive <= 0 || run.Replay <= 0 {
				t.Errorf("%s shape: %+v", sr.Shape, sr)
			}
		}
	}
}

// researchFigures is what the smoke test reads of one research run.
type researchFigures struct {
	Parallel      int     `json:"max_parallel_tool_calls"`
	N             int     `json:"invocations"`
	P50Ms         float64 `json:"answer_p50_ms"`
	Ratio         float64 `json:"floor_ratio"`
	LisaCPU       float64 `json:"lisa_cpu_ms_per_invocation"`
	PageRequests  float64 `json:"page_requests_per_invocation"`
	ModelRequests float64 `json:"model_requests_per_invocation"`
	Segments      []struct{ Name string }
}

// startFigures is what the smoke test reads of one start.
type startFigures struct {
	FirstAnswer float64 `json:"first_answer_seconds"`
	AllLive     float64 `json:"all_rooms_live_seconds"`
	Replay      float64 `json:"replay_events_per_second"`
}

// The bench's journals are those of idle rooms: exactly n events, and
// nothing in flight at the end (from n = 4, one whole invocation, on).
func TestRoomHistoryEndsIdle(t *testing.T) {
	for _, n := range []int{4, 5, 7, 49, 50, 51, 100} {
		evs, _ := roomHistory("!r:bench.test", n)
		if len(evs) != n {
			t.Fatalf("n=%d: %d events", n, len(evs))
		}
		var st room.State
		for _, ev := range evs {
			if err := st.Apply(ev); err != nil {
				t.Fatalf("n=%d: %v", n, err)
			}
		}
		if len(st.Queue) != 0 {
			t.Errorf("n=%d: %d invocations in flight at the end", n, len(st.Queue))
		}
	}
}

func TestRoomHistoryReplaysToItsSnapshots(t *testing.T) {
	evs, snaps := roomHistory("!r:bench.test", 120)
	if len(evs) != 120 {
		t.Fatalf("%d events", len(evs))
	}
	for _, idx := range []int{0, 50, 100} {
		if snaps[idx] == nil {
			t.Fatalf("no snapshot at %d (have %d)", idx, len(snaps))
		}
		if got := snaps[idx].GetNextEventIndex(); got != uint64(idx) {
			t.Errorf("snapshot at %d says next index %d", idx, got)
		}
	}
}
