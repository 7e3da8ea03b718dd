package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/actors/invocation"
	"github.com/lisabot/lisa/actors/tools"
	"github.com/lisabot/lisa/adapters/logging"
	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/adapters/metrics"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/daemon"
	"github.com/lisabot/lisa/devkit/dendrite"
	"github.com/lisabot/lisa/devkit/llmscript"
	"github.com/lisabot/lisa/devkit/searx"
	"github.com/lisabot/lisa/devkit/webpages"
)

// Demo accounts. The human's password is printed so a person can log in
// with a real client; it only exists on a throwaway local homeserver.
const (
	demoHumanPassword = "demo-password-1"
	demoLisaDevice    = "LISADEMO"
)

// demo runs the whole system on this machine: a local Dendrite, a room, a
// scripted (or real) LLM and Lisa's actor tree on Badger.
func demo(ctx context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "demo", "[--exit-after-transcript]")
	exitAfter := fs.Bool("exit-after-transcript", false, "stop everything after printing the transcript (for CI)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if err := runDemo(ctx, c, *exitAfter); err != nil {
		fmt.Fprintln(c.stderr, "lisa demo:", err)
		return exitFailure
	}
	return exitOK
}

// demoStack is the demo's local homeserver, accounts and room.
type demoStack struct {
	hs                     *dendrite.Server
	lisaAcc, humAcc, alice dendrite.Account
	human, aliceCli        *mautrix.Client
	room                   id.RoomID
}

// demoWeb is the demo's local stand-in for the internet: a SearXNG JSON
// API whose results point at a small web site on this machine.
type demoWeb struct {
	search *searx.Server
	site   *webpages.Server
}

// demoObserver, when set (by a test), sees the finished run after the
// transcript and before everything stops. It is nil in the binary.
var demoObserver func(ctx context.Context, run demoResult)

// demoResult is what a finished run exposes to [demoObserver].
type demoResult struct {
	human     *mautrix.Client
	room      id.RoomID
	lisa, bob string
	alice     string
	requested []string // URLs the local web site served
	queries   []string // queries the local SearXNG answered
}

func runDemo(ctx context.Context, c *cli, exitAfter bool) error {
	out := c.stdout
	work, err := os.MkdirTemp("", "lisa-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	st, err := startDemoStack(ctx, work, out)
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = st.hs.Stop(stopCtx)
	}()
	web, err := startDemoWeb()
	if err != nil {
		return err
	}
	defer web.search.Close()
	defer web.site.Close()
	res, llmURL, stopLLM, err := demoConfig(c, work, st, web)
	if err != nil {
		return err
	}
	defer stopLLM()
	logs := &logTap{forward: c.stderr}
	log := logging.New(logs, res.Config.Runtime.SlogLevel(), append(res.Secrets(), st.humAcc.AccessToken, st.alice.AccessToken))
	session, err := matrix.Connect(ctx, res.Config.Matrix.HomeserverURL, res.Config.Matrix.UserID, res.Config.Matrix.DeviceID, res.MatrixAccessToken.Reveal(), daemon.MatrixHTTPClient(res.Config.Runtime))
	if err != nil {
		return err
	}
	probe := &invocationProbe{logs: logs}
	invoker := daemon.ProductionInvoker(res, log)(session)
	d, err := daemon.Start(res, log, daemon.Deps{Session: session, Invoker: func(t *tools.Client, m *metrics.Metrics) invocation.Invoker {
		probe.setMetrics(m)
		return invoker(t, m)
	}})
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), res.Config.Runtime.ShutdownGrace())
		defer cancel()
		_ = d.Stop(stopCtx)
	}()

	fmt.Fprintf(out, "[demo] homeserver %s, room %s, Lisa is %s, LLM %s\n", st.hs.URL(), st.room, st.lisaAcc.UserID, llmURL)
	fmt.Fprintf(out, "[demo] local SearXNG %s and web site %s stand in for the internet\n", web.search.URL(), web.site.Pages()[0].URL)
	if err := d.AwaitBaseline(ctx, time.Minute); err != nil {
		return err
	}
	if err := playConversation(ctx, st, session, probe); err != nil {
		return err
	}
	if err := printTranscript(ctx, out, st.human, st.room, probe.summaries()); err != nil {
		return err
	}
	if demoObserver != nil {
		demoObserver(ctx, demoResult{human: st.human, room: st.room, lisa: st.lisaAcc.UserID, bob: st.humAcc.UserID,
			alice: st.alice.UserID, requested: web.site.Requested(), queries: web.search.Queries()})
	}
	if exitAfter {
		return nil
	}
	fmt.Fprintf(out, "\n[demo] running. Join with any Matrix client:\n  homeserver: %s\n  user:       %s\n  password:   %s\n  room:       %s\nPress Ctrl-C to stop.\n",
		st.hs.URL(), st.humAcc.UserID, demoHumanPassword, st.room)
	<-ctx.Done()
	fmt.Fprintln(out, "[demo] stopping")
	return nil
}

// startDemoWeb starts the local web site and the SearXNG fake indexing
// its pages.
func startDemoWeb() (*demoWeb, error) {
	site, err := webpages.Start()
	if err != nil {
		return nil, err
	}
	var index []searx.Result
	for _, p := range site.Pages() {
		index = append(index, searx.Result{URL: p.URL, Title: p.Title, Content: p.Summary})
	}
	search, err := searx.Start(index...)
	if err != nil {
		site.Close()
		return nil, err
	}
	return &demoWeb{search: search, site: site}, nil
}

// launchWithProgress launches Dendrite, printing the current start-up step
// and the time spent so far every ten seconds, so the first run's build
// is not a silent wait.
func launchWithProgress(ctx context.Context, out io.Writer, dataDir string) (*dendrite.Server, error) {
	began := time.Now()
	var mu sync.Mutex
	step := "preparing the local homeserver"
	fmt.Fprintf(out, "[demo] %s…\n", step)
	progress := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		step = s
		fmt.Fprintf(out, "[demo] %s…\n", s)
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				mu.Lock()
				fmt.Fprintf(out, "[demo] %s… %s\n", step, time.Since(began).Round(time.Second))
				mu.Unlock()
			}
		}
	}()
	hs, err := dendrite.Launch(ctx, dendrite.Options{DataDir: dataDir, Progress: progress})
	close(done)
	<-finished
	if err == nil {
		fmt.Fprintf(out, "[demo] homeserver ready after %s\n", time.Since(began).Round(100*time.Millisecond))
	}
	return hs, err
}

// startDemoStack launches Dendrite, registers Lisa and two people (the
// human the demo speaks for, "Bob", and "Alice"), and has Bob create a
// room the others join. The caller stops st.hs.
func startDemoStack(ctx context.Context, work string, out io.Writer) (_ *demoStack, err error) {
	hs, err := launchWithProgress(ctx, out, filepath.Join(work, "dendrite"))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			stopCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			_ = hs.Stop(stopCtx)
		}
	}()
	st := &demoStack{hs: hs}
	if st.lisaAcc, err = hs.RegisterUser(ctx, "lisa", "lisa-password-1", demoLisaDevice); err != nil {
		return nil, err
	}
	if st.humAcc, err = hs.RegisterUser(ctx, "human", demoHumanPassword, "HUMANDEMO"); err != nil {
		return nil, err
	}
	if st.alice, err = hs.RegisterUser(ctx, "alice", "alice-password-1", "ALICEDEMO"); err != nil {
		return nil, err
	}
	var lisaCli *mautrix.Client
	for _, u := range []struct {
		acc  dendrite.Account
		cli  **mautrix.Client
		name string
	}{{st.humAcc, &st.human, "Bob"}, {st.alice, &st.aliceCli, "Alice"}, {st.lisaAcc, &lisaCli, "Lisa"}} {
		if *u.cli, err = mautrix.NewClient(hs.URL(), id.UserID(u.acc.UserID), u.acc.AccessToken); err != nil {
			return nil, err
		}
		if err := (*u.cli).SetDisplayName(ctx, u.name); err != nil {
			return nil, fmt.Errorf("set display name: %w", matrix.Classify(err))
		}
	}
	created, err := st.human.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Name: "Lisa demo",
		Invite: []id.UserID{id.UserID(st.lisaAcc.UserID), id.UserID(st.alice.UserID)}})
	if err != nil {
		return nil, fmt.Errorf("create room: %w", matrix.Classify(err))
	}
	st.room = created.RoomID
	for _, cli := range []*mautrix.Client{lisaCli, st.aliceCli} {
		if _, err := cli.JoinRoomByID(ctx, created.RoomID); err != nil {
			return nil, fmt.Errorf("%s joins: %w", cli.UserID, matrix.Classify(err))
		}
	}
	return st, nil
}

// demoConfig writes the persona and configuration files into work and
// loads them. The LLM is a real endpoint if the operator named one
// (LISA_DEMO_LLM_*), else the scripted model speaking the same wire
// format; stop ends the latter.
func demoConfig(c *cli, work string, st *demoStack, web *demoWeb) (res config.Resolved, llmURL string, stop func(), err error) {
	env := map[string]string{"LISA_MATRIX_ACCESS_TOKEN": st.lisaAcc.AccessToken}
	getenv := func(k string) string { v, _ := c.getenv(k); return v }
	llmURL, model := getenv("LISA_DEMO_LLM_URL"), getenv("LISA_DEMO_LLM_MODEL")
	keyLine, stop := `api_key = ""`, func() {}
	if llmURL == "" {
		fake := llmscript.New(llmscript.WithModels("lisa-demo-model"), llmscript.WithDefault(llmscript.Func(demoModel)))
		if err := fake.Listen(); err != nil {
			return res, "", nil, err
		}
		llmURL, model, stop = fake.URL(), "lisa-demo-model", func() { fake.Close() }
	} else if key := getenv("LISA_DEMO_LLM_KEY"); key != "" {
		env["LISA_DEMO_LLM_KEY"] = key
		keyLine = `api_key = "env:LISA_DEMO_LLM_KEY"`
	}
	if model == "" {
		return res, "", stop, fmt.Errorf("LISA_DEMO_LLM_URL is set but LISA_DEMO_LLM_MODEL is not")
	}
	persona := "You are Lisa, a warm and concise helper in a small private room. You answer in short paragraphs."
	if err := os.WriteFile(filepath.Join(work, "persona.md"), []byte(persona+"\n"), 0o600); err != nil {
		return res, "", stop, err
	}
	cfgPath := filepath.Join(work, "lisa.toml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(demoConfigTemplate, st.hs.URL(), st.lisaAcc.UserID, st.lisaAcc.DeviceID, st.room, llmURL, keyLine, model, web.search.URL())), 0o600); err != nil {
		return res, "", stop, err
	}
	res, err = config.LoadAndResolve(cfgPath, func(k string) (string, bool) {
		if v, ok := env[k]; ok {
			return v, true
		}
		return c.getenv(k)
	})
	if err != nil {
		return res, "", stop, fmt.Errorf("demo configuration: %w", err)
	}
	return res, llmURL, stop, nil
}

// demoConfigTemplate is the demo's configuration file: homeserver, user,
// device, room, LLM URL, API key line, model and search endpoint.
//
// Search goes to the demo's own SearXNG stand-in, whose results point at
// the demo's web site on 127.0.0.1, so research works with no internet
// access and with a real model too. Lisa's fetch guard refuses private
// and loopback addresses by default (a production Lisa must never be
// talked into reading the operator's LAN); the demo turns that off,
// because here the only "web site" is on loopback. Never copy this
// setting into a real deployment. log_level is "info" because the
// transcript's per-invocation summary is read from Lisa's own logs; the
// demo shows only warnings and errors on stderr.
const demoConfigTemplate = `[matrix]
homeserver_url = %q
user_id = %q
device_id = %q
access_token = "env:LISA_MATRIX_ACCESS_TOKEN"
allowed_room_ids = [%q]
mention_aliases = ["Lisa"]

[llm]
base_url = %q
%s
model = %q

[persona]
path = "persona.md"
generic_error = "Oh dear, my thoughts got tangled. Please ask me again."
overload_error = "That is more than I can untangle at once. Try a narrower question."

[search]
endpoint = %q
max_results = 3
timeout_seconds = 5

[web]
allow_private_addresses = true

[runtime]
data_dir = "data"
log_level = "info"
`

// playConversation plays the demo's conversation: Alice mentions a plan,
// Bob asks Lisa about it (answered from the room), asks her to look
// something up (answered from a fetched page, with sources) and replies
// to that answer without mentioning her. It waits for each of her
// replies and has probe summarize each invocation.
func playConversation(ctx context.Context, st *demoStack, session *matrix.Client, probe *invocationProbe) error {
	say := func(cli *mautrix.Client, body string, extra func(*event.MessageEventContent)) (string, error) {
		content := &event.MessageEventContent{MsgType: event.MsgText, Body: body}
		if extra != nil {
			extra(content)
		}
		resp, err := cli.SendMessageEvent(ctx, st.room, event.EventMessage, content)
		if err != nil {
			return "", matrix.Classify(err)
		}
		return string(resp.EventID), nil
	}
	ask := func(body string, extra func(*event.MessageEventContent)) (string, error) {
		before := probe.snapshot()
		ev, err := say(st.human, body, extra)
		if err != nil {
			return "", err
		}
		reply, err := awaitReply(ctx, session, string(st.room), ev)
		if err == nil {
			probe.record(ctx, reply, before)
		}
		return reply, err
	}
	mention := func(m *event.MessageEventContent) {
		m.Mentions = &event.Mentions{UserIDs: []id.UserID{id.UserID(st.lisaAcc.UserID)}}
	}
	if _, err := say(st.human, "Morning! Are we still on for self-hosting our chat?", nil); err != nil {
		return err
	}
	if _, err := say(st.aliceCli, "Yes! I'll set up our own homeserver this weekend, on the old NUC in the office.", nil); err != nil {
		return err
	}
	if _, err := ask("Lisa, who offered to set up our homeserver, and on which machine?", mention); err != nil {
		return err
	}
	research, err := ask("Lisa, can you look up what Dendrite is and whether it's ready for a small team?", mention)
	if err != nil {
		return err
	}
	_, err = ask("Thanks! Do we need PostgreSQL for a small team like ours, or is SQLite enough?", func(m *event.MessageEventContent) {
		m.RelatesTo = &event.RelatesTo{InReplyTo: &event.InReplyTo{EventID: id.EventID(research)}}
	})
	return err
}

// awaitReply waits (bounded) until Lisa's reply to event is on the
// homeserver.
func awaitReply(ctx context.Context, s *matrix.Client, room, eventID string) (string, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		id, found, err := s.FindReply(ctx, room, eventID, "")
		if err == nil && found {
			return id, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no reply from Lisa within 2 minutes")
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// printTranscript prints the room's messages as the homeserver stores
// them, oldest first, each of Lisa's replies followed by the summary of
// its invocation.
func printTranscript(ctx context.Context, w io.Writer, cli *mautrix.Client, room id.RoomID, summaries map[string]string) error {
	resp, err := cli.Messages(ctx, room, "", "", mautrix.DirectionBackward, &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}, 100)
	if err != nil {
		return matrix.Classify(err)
	}
	fmt.Fprintln(w, "\n--- transcript (as stored by the homeserver) ---")
	for i := len(resp.Chunk) - 1; i >= 0; i-- {
		evt := resp.Chunk[i]
		body, _ := evt.Content.Raw["body"].(string)
		body = event.TrimReplyFallbackText(body)
		fmt.Fprintf(w, "%s: %s\n", evt.Sender, strings.ReplaceAll(body, "\n", "\n    "))
		if sum, ok := summaries[string(evt.ID)]; ok {
			fmt.Fprintf(w, "    [lisa's logs] %s\n", sum)
		}
	}
	fmt.Fprintln(w, "--- end ---")
	return nil
}

// logTap keeps Lisa's JSON log lines for the transcript's summaries and
// forwards warnings and errors to the operator.
type logTap struct {
	forward io.Writer

	mu      sync.Mutex
	partial []byte
	lines   []string
}

func (t *logTap) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(t.partial[:i])
		t.partial = t.partial[i+1:]
		t.lines = append(t.lines, line)
		if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
			fmt.Fprintln(t.forward, line)
		}
	}
}

// records returns the parsed log records with message msg, oldest first.
func (t *logTap) records(msg string) []map[string]any {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []map[string]any
	for _, l := range t.lines {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// invocationProbe summarizes each invocation in one line from what Lisa
// itself reports: the duration_ms of her "invocation attempt finished" log
// record, and the change in her LLM-request and tool-call counters
// (lisa_llm_requests_total, lisa_tool_calls_total) while it ran. The
// demo's invocations run one at a time, so the change is that
// invocation's.
type invocationProbe struct {
	logs *logTap

	mu   sync.Mutex
	met  *metrics.Metrics
	sums map[string]string // reply event ID → summary
}

// probeMark is the state before an invocation.
type probeMark struct {
	counters map[string]float64
	finished int
}

func (p *invocationProbe) setMetrics(m *metrics.Metrics) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.met = m
}

func (p *invocationProbe) snapshot() probeMark {
	return probeMark{counters: p.counters(), finished: len(p.logs.records("invocation attempt finished"))}
}

// counters scrapes Lisa's metrics: series name and labels → value, for
// the LLM-request and tool-call counters.
func (p *invocationProbe) counters() map[string]float64 {
	p.mu.Lock()
	m := p.met
	p.mu.Unlock()
	out := map[string]float64{}
	if m == nil {
		return out
	}
	var rec scrapeRecorder
	m.Handler().ServeHTTP(&rec, &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/metrics"}, Header: http.Header{}})
	for _, line := range strings.Split(rec.body.String(), "\n") {
		if !strings.HasPrefix(line, "lisa_tool_calls_total{") && !strings.HasPrefix(line, "lisa_llm_requests_total{") {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if v, err := strconv.ParseFloat(value, 64); ok && err == nil {
			out[series] = v
		}
	}
	return out
}

// record stores the summary of the invocation that produced reply.
func (p *invocationProbe) record(ctx context.Context, reply string, before probeMark) {
	var finished []map[string]any
	for deadline := time.Now().Add(5 * time.Second); ; {
		finished = p.logs.records("invocation attempt finished")
		if len(finished) > before.finished || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := "time not logged"
	if len(finished) > before.finished {
		if ms, ok := finished[len(finished)-1]["duration_ms"].(float64); ok {
			took = fmt.Sprintf("answered in %s", (time.Duration(ms) * time.Millisecond).Round(10*time.Millisecond))
		}
	}
	after := p.counters()
	llm, tools := 0.0, []string{}
	// Tools in the order the research loop uses them, then any others.
	rank := func(series string) string {
		for i, t := range []string{"web_search", "fetch_web_page", "html_to_markdown"} {
			if promLabel(series, "tool") == t {
				return strconv.Itoa(i) + series
			}
		}
		return "9" + series
	}
	for _, series := range slices.SortedFunc(maps.Keys(after), func(a, b string) int { return strings.Compare(rank(a), rank(b)) }) {
		d := after[series] - before.counters[series]
		switch {
		case d <= 0:
		case strings.HasPrefix(series, "lisa_llm_requests_total"):
			llm += d
		default:
			tools = append(tools, fmt.Sprintf("%s %s ×%g", promLabel(series, "tool"), promLabel(series, "result"), d))
		}
	}
	if len(tools) == 0 {
		tools = []string{"none"}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sums == nil {
		p.sums = map[string]string{}
	}
	p.sums[reply] = fmt.Sprintf("%s · LLM requests: %g · tool calls: %s", took, llm, strings.Join(tools, ", "))
}

func (p *invocationProbe) summaries() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.sums)
}

// promLabel returns a label's value from a Prometheus series name.
func promLabel(series, label string) string {
	_, rest, ok := strings.Cut(series, label+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// scrapeRecorder is the http.ResponseWriter an in-process scrape of
// Lisa's metrics handler writes to.
type scrapeRecorder struct {
	header http.Header
	body   bytes.Buffer
}

func (r *scrapeRecorder) Header() http.Header {
	if r.header == nil {
		r.header = http.Header{}
	}
	return r.header
}
func (r *scrapeRecorder) Write(p []byte) (int, error) { return r.body.Write(p) }
func (r *scrapeRecorder) WriteHeader(int)             {}
