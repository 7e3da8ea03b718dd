//go:build linux || darwin

package render

import (
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Per-call bounds of issue #15 on the project's 2-core CI machine.
const (
	// maxCPU is the CPU time one Render call may take, times costScale.
	maxCPU = 50 * time.Millisecond
	// maxAlloc is the heap one Render call may allocate.
	maxAlloc = 16 << 20
)

// cost is what one call cost: the process's user plus system CPU time
// (other goroutines count too, so measured calls run one at a time) and
// the bytes allocated on the heap.
type cost struct {
	cpu   time.Duration
	alloc uint64
}

// measure runs f once and reports its cost, collecting garbage first so
// that an earlier call's debt is not charged to f.
func measure(t *testing.T, f func()) cost {
	t.Helper()
	cpuTime := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0 := cpuTime()
	f()
	cpu1 := cpuTime()
	runtime.ReadMemStats(&after)
	return cost{cpu: cpu1 - cpu0, alloc: after.TotalAlloc - before.TotalAlloc}
}

// misleadingLinks returns an answer of at most size bytes made of n links
// whose labels name a host other than their target, in the shapes the
// link rule rewrites (bare domain, www., URL, look-alike, matrix target).
func misleadingLinks(n, size int) string {
	var b strings.Builder
	b.WriteString("[r]: https://evil.example\n[m]: matrix:r/x:evil.example\n\n")
	shapes := []string{"[b.io][r] ", "[c.io][m] ", "[www.b.io][r] ", "[http://b.io][r] ", "[bа.io][r] "}
	for i := range n {
		b.WriteString(shapes[i%len(shapes)])
		if i%16 == 15 {
			b.WriteString("\n")
		}
	}
	if b.Len() > size {
		panic(fmt.Sprintf("%d links take %d bytes, over %d", n, b.Len(), size))
	}
	return b.String()
}

// TestMisleadingLinksCost holds one reply full of rewritten links to the
// per-call bounds of issue #15 (maxCPU, times costScale under the race
// detector, and maxAlloc): a 64 KB answer of 5,000 misleading links. Render's byte budget cuts the Markdown before it is
// parsed, and an attempt whose plain text and unsanitised HTML already
// overflow the budget is cut again before sanitising, so the cost does
// not grow with the answer. The best of a few runs is taken, as other
// goroutines' CPU time counts too.
func TestMisleadingLinksCost(t *testing.T) {
	const (
		links = 5000
		size  = 64 << 10
		runs  = 5
	)
	md := misleadingLinks(links, size)
	r := New()
	a := Answer{Markdown: md, InReplyTo: Invoking{EventID: "$e", Sender: "@a:b", Body: "q"}}
	b, err := r.Render(a) // warm up
	if err != nil {
		t.Fatal(err)
	}
	got := checkContent(t, b, "$e")
	if strings.Contains(got.Body, "b.io") || !strings.Contains(got.Body, "https://evil.example") {
		t.Fatalf("links not rewritten: %.300q", got.Body)
	}

	bound := maxCPU * costScale
	best := cost{cpu: time.Hour}
	for range runs {
		c := measure(t, func() {
			if _, err := r.Render(a); err != nil {
				t.Error(err)
			}
		})
		best.cpu = min(best.cpu, c.cpu)
		best.alloc = max(best.alloc, c.alloc)
	}
	t.Logf("%d bytes, %d links: %v CPU (best of %d), %.1f MiB allocated (worst)", len(md), links, best.cpu, runs, float64(best.alloc)/(1<<20))
	if best.cpu > bound {
		t.Errorf("rendering took %v of CPU, over %v", best.cpu, bound)
	}
	if best.alloc > maxAlloc {
		t.Errorf("rendering allocated %.1f MiB, over %d MiB", float64(best.alloc)/(1<<20), maxAlloc>>20)
	}
}

// TestHostileMarkdownCost holds a reply quoting each of hostileMarkdown's
// answers to the per-call bounds of issue #15 (maxCPU and maxAlloc, times
// costScale and allocScale under the race detector), as testkit/hostile
// does for the whole path of one event, and checks that the reply is
// still a valid, non-empty message. The best CPU time of a few runs is
// taken, as other goroutines' CPU time counts too.
func TestHostileMarkdownCost(t *testing.T) {
	const runs = 3
	r := New()
	for _, c := range hostileMarkdown() {
		t.Run(c.name, func(t *testing.T) {
			if len(c.md) > hostileBytes || len(c.md) < hostileBytes*9/10 {
				t.Fatalf("answer of %d bytes, want about %d", len(c.md), hostileBytes)
			}
			b, err := r.Reply(c.md, "$e") // warm up
			if err != nil {
				t.Fatal(err)
			}
			got := checkContent(t, b, "$e")
			if strings.TrimSpace(got.Body) == "" || strings.TrimSpace(got.FormattedBody) == "" {
				t.Fatalf("empty reply: %.300s", b)
			}
			if strings.Contains(c.md, "what is this?") && !strings.Contains(got.Body, "what is this?") {
				t.Errorf("the answer's text is lost: %.300q", got.Body)
			}
			best := cost{cpu: time.Hour}
			for range runs {
				m := measure(t, func() {
					if _, err := r.Reply(c.md, "$e"); err != nil {
						t.Error(err)
					}
				})
				best.cpu = min(best.cpu, m.cpu)
				best.alloc = max(best.alloc, m.alloc)
			}
			t.Logf("%d bytes: %v CPU (best of %d), %.1f MiB allocated (worst), reply %d bytes", len(c.md), best.cpu, runs, float64(best.alloc)/(1<<20), len(b))
			if bound := maxCPU * costScale; best.cpu > bound {
				t.Errorf("rendering took %v of CPU, over %v", best.cpu, bound)
			}
			if bound := uint64(maxAlloc * allocScale); best.alloc > bound {
				t.Errorf("rendering allocated %.1f MiB, over %d MiB", float64(best.alloc)/(1<<20), bound>>20)
			}
		})
	}
}
