package matrix

import (
	"context"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
)

// Bounds on classifying one event with a body of the largest size a
// homeserver delivers (an event is at most 64 KiB).
const (
	maxClassifyCPU   = 50 * time.Millisecond // times cpuBoundScale
	maxClassifyAlloc = 16 << 20
)

// processCPU is the user and system CPU time the process has used.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// repeatTo repeats unit until the result is at least n bytes long.
func repeatTo(unit string, n int) string {
	return strings.Repeat(unit, (n+len(unit)-1)/len(unit))
}

// TestMentionScanCost: a 60 KB body full of near-matches of an alias
// ("lisalisa…", where no occurrence is a whole word) took 0.74 s of CPU
// per event when every occurrence converted the text before it to runes.
// Each shape must be classified correctly within maxClassifyCPU and
// maxClassifyAlloc per event.
func TestMentionScanCost(t *testing.T) {
	const size = 60 << 10
	c := NewClassifier(testBot, []string{string(testRoom)}, []string{"Lisa", "@Lisa"})
	notLisa := func(context.Context, string, string) (bool, error) { return false, nil }
	for _, tc := range []struct {
		name      string
		body      string
		formatted string // an HTML body besides, when set
		want      Verdict
	}{
		{"lisa repeated", repeatTo("lisa", size), "", RejectNotAddress},
		{"lisa_ repeated", repeatTo("lisa_", size), "", RejectNotAddress},
		{"élisa repeated", repeatTo("élisa", size), "", RejectNotAddress},
		{"LISA repeated", repeatTo("LISA", size), "", RejectNotAddress},
		{"multibyte runes, then the alias", repeatTo("漢", size) + " lisa", "", TriggerAlias},
		{"multibyte runes glued to the alias", repeatTo("ж", size) + "lisa", "", RejectNotAddress},
		// Runes whose folding is longer than themselves.
		{"ß repeated, then the alias", repeatTo("ß", size) + " LISA", "", TriggerAlias},
		{"ΐ repeated", repeatTo("ΐ", size) + "lisa", "", RejectNotAddress},
		{"quoted lines, then the alias", "> <@u:hs> " + repeatTo("> lisa\n", size) + "\nlisa?", "", TriggerAlias},
		{"newlines", repeatTo("\n", size) + "lisa", "", TriggerAlias},
		{"nested reply fallbacks", "lisalisa", "<mx-reply>" + repeatTo("<mx-reply>lisa", size), RejectNotAddress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const runs = 3
			evts := make([]*event.Event, runs)
			for i := range evts {
				content := text(tc.body)
				if tc.formatted != "" {
					content["format"], content["formatted_body"] = "org.matrix.custom.html", tc.formatted
				}
				evts[i] = mkEvent(t, "@u:hs", "m.room.message", content, nil)
			}
			ctx := context.Background()
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			alloc0, cpu0 := ms.TotalAlloc, processCPU(t)
			for _, evt := range evts {
				if _, got := c.Classify(ctx, testRoom, evt, notLisa); got != tc.want {
					t.Fatalf("verdict %s, want %s", got, tc.want)
				}
			}
			cpu := (processCPU(t) - cpu0) / runs
			runtime.ReadMemStats(&ms)
			alloc := (ms.TotalAlloc - alloc0) / runs
			t.Logf("per event: %v CPU, %d KiB allocated", cpu, alloc>>10)
			if limit := maxClassifyCPU * cpuBoundScale; cpu > limit {
				t.Errorf("%v CPU per event, want at most %v", cpu, limit)
			}
			if alloc > maxClassifyAlloc {
				t.Errorf("%d bytes allocated per event, want at most %d", alloc, maxClassifyAlloc)
			}
		})
	}
}
