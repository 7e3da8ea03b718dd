package main

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// prefixReport is how much of each LLM request repeats the start of the
// one before it, in a lived-in room: llama.cpp, vLLM and Ollama compute
// only what follows the prefix they have seen (issue #30).
type prefixReport struct {
	// Invocations and MessagesBetween describe the room's life: that many
	// mentions, with MessagesBetween messages of others before each.
	Invocations     int `json:"invocations"`
	MessagesBetween int `json:"messages_between"`
	// Requests are the LLM requests compared (all but the first).
	Requests int `json:"requests"`
	// WindowStepEvents and MaxEvents are the context settings used.
	WindowStepEvents int `json:"window_step_events"`
	MaxEvents        int `json:"max_events"`
	// SharedFraction is Σ shared prefix ÷ Σ request size over successive
	// requests, in bytes of the prompt text (tools, then each message's
	// role and content, as a chat template lays them out).
	SharedFraction float64 `json:"shared_prefix_fraction"`
	// P10Fraction and MinFraction are the tenth percentile and the least
	// of the per-request fractions: the requests after the excerpt's
	// start moved.
	P10Fraction float64 `json:"p10_fraction"`
	// P50Fraction is the median: a request after which the start stayed.
	P50Fraction float64 `json:"p50_fraction"`
	MinFraction float64 `json:"min_fraction"`
	// MeanRequestBytes is the average prompt text.
	MeanRequestBytes int `json:"mean_request_bytes"`
	// StartMoves counts requests whose shared prefix ends inside the
	// excerpt's first message: the excerpt's start moved.
	StartMoves int    `json:"start_moves"`
	Measured   string `json:"measured"`
}

// benchPrefix lives through a room: before the measurement the room
// holds maxEvents messages; then, invocations times, messagesBetween
// messages of two people and a mention of Lisa, whose reply is awaited.
// It measures the shared prefix of each LLM request with the one before.
func benchPrefix(ctx context.Context, work string, o benchOptions) (*prefixReport, error) {
	waiter := newArrivals(nil)
	hs, rooms, err := startFake(1, "px", waiter, nil)
	if err != nil {
		return nil, err
	}
	defer hs.Close()
	room := rooms[0]
	hs.CreateRoom(room, map[string]string{benchHuman: "Ann", benchOther: "Ben"})
	llm := llmfake.New(llmfake.WithModels("bench-model"), llmfake.WithDefault(llmfake.Func(func(r llmfake.Request) llmfake.Step {
		return llmfake.Answer(fmt.Sprintf("Noted — that was message %d of this room. Anything else?", len(r.Messages)+r.Seq))
	})))
	if err := llm.Listen(); err != nil {
		return nil, err
	}
	defer llm.Close()
	const maxEvents = 40 // context.max_events' default
	extra := ""
	if o.prefixStep > 0 {
		extra = fmt.Sprintf("\n[context]\nwindow_step_events = %d\n", o.prefixStep)
	}
	lisa, err := startBenchLisaWith(ctx, work, benchTarget{hs.URL(), benchBot, benchDevice, benchToken}, llm.URL(), rooms, 1, o.logOut, extra)
	if err != nil {
		return nil, err
	}
	defer lisa.stop()
	if err := lisa.d.AwaitBaseline(ctx, time.Minute); err != nil {
		return nil, err
	}
	say := func(n int) error {
		for k := range n {
			sender := benchHuman
			if k%2 == 1 {
				sender = benchOther
			}
			if _, _, err := hs.Post(room, sender, map[string]any{"msgtype": "m.text", "body": chatter(k + n*7 + len(hs.Events(room)))}); err != nil {
				return err
			}
		}
		return nil
	}
	if err := say(maxEvents); err != nil {
		return nil, err
	}
	for i := range o.prefixInvocations {
		if err := say(o.prefixBetween); err != nil {
			return nil, err
		}
		ev, _, err := hs.Post(room, benchHuman, mention(benchBot, i))
		if err != nil {
			return nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		select {
		case <-waiter.expect(ev):
		case <-wctx.Done():
			cancel()
			return nil, fmt.Errorf("invocation %d: no reply", i)
		}
		cancel()
	}
	reqs := llm.Requests()
	rep := &prefixReport{Invocations: o.prefixInvocations, MessagesBetween: o.prefixBetween, MaxEvents: maxEvents,
		WindowStepEvents: cmp.Or(o.prefixStep, config.Default().Context.WindowStepEvents),
		Measured:         "shared prefix of each request's prompt text (tools, then role and content of each message) with the previous request's, summed and divided by the requests' summed size; the room starts with 40 messages"}
	var shared, total int
	var fractions []float64
	for i := 1; i < len(reqs); i++ {
		prev, cur := promptText(reqs[i-1]), promptText(reqs[i])
		n := commonPrefix(prev, cur)
		shared += n
		total += len(cur)
		fractions = append(fractions, float64(n)/float64(len(cur)))
		if first := strings.Index(cur, "</message>"); first >= 0 && n < first {
			rep.StartMoves++ // the excerpt's first message changed
		}
	}
	rep.Requests = len(fractions)
	if total > 0 {
		rep.SharedFraction = float64(shared) / float64(total)
		rep.MeanRequestBytes = total / len(fractions)
		rep.P10Fraction, rep.P50Fraction, rep.MinFraction = pctFloat(fractions, 10), pctFloat(fractions, 50), pctFloat(fractions, 0)
	}
	return rep, nil
}

// benchOther is the second person of the lived-in room.
const benchOther = "@ben:bench.test"

// promptText lays a request out as a chat template does: the tools, then
// each message's role, content and tool calls.
func promptText(r llmfake.Request) string {
	var b strings.Builder
	for _, t := range r.Tools {
		b.WriteString(t.Name + "\n" + t.Description + "\n" + string(t.Parameters) + "\n")
	}
	for _, m := range r.Messages {
		b.WriteString("<|" + m.Role + "|>\n" + m.Content + "\n")
		for _, c := range m.ToolCalls {
			b.WriteString(c.Name + c.Arguments + "\n")
		}
	}
	return b.String()
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// chatter is the k-th line of the room's small talk: ordinary chat
// messages of varying length.
func chatter(k int) string {
	lines := []string{
		"Morning! Did anyone see the note about the heating in the office?",
		"Yes, they said it will be fixed by Thursday.",
		"Great. I'll bring the spare heater until then.",
		"Who is coming to the retro this afternoon? I booked the small room.",
		"Me, but I might be ten minutes late because of the dentist.",
		"Can someone review my pull request for the export feature? It is small.",
		"On it after lunch.",
		"Thanks! The tests pass locally, CI is still running.",
		"Reminder: the release freeze starts on Monday, so merge what you can this week.",
		"Noted. I still have the migration script to finish, should be done tomorrow.",
		"Lunch at the Thai place today?",
		"Sounds good, 12:30?",
	}
	return lines[k%len(lines)]
}

// pctFloat returns the p-th percentile of xs (0 is the least).
func pctFloat(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	i := int(p / 100 * float64(len(s)-1))
	return s[i]
}

// prefixWork is the phase's directory under the bench's.
func prefixWork(work string) string { return filepath.Join(work, "prefix") }
