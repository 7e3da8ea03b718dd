package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/devkit/homeserver"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// Minimums are what a campaign must have done before its traffic phase
// may end.
type Minimums struct {
	Invocations, ActorFaults, Kills, HomeserverRestarts int
	// EachRelation is the least number of messages of each relation
	// kind (RelationKinds): thread questions, edits, redactions.
	EachRelation int
}

// Config describes a campaign.
type Config struct {
	// Seed drives every random choice of the campaign; print it, and a
	// failing campaign can be replayed.
	Seed uint64
	// Duration is the least time the traffic phase runs; it goes on until
	// Min is reached too, but never beyond MaxDuration.
	Duration, MaxDuration time.Duration
	Min                   Minimums
	// Rooms is how many allowed rooms get traffic (plus one room Lisa is
	// in but not allowed to answer).
	Rooms int
	// ActorRate is the per-message actor fault probability; Kills the
	// per-pass failpoint kill probabilities (see ActorPlan).
	ActorRate float64
	Kills     map[string]float64
	// NetRate is the per-request fault probability of both proxies.
	NetRate float64
	// MessageEvery, KillEvery and RestartEvery are ranges [min, max] of
	// the pauses between human messages, SIGKILLs and homeserver restarts.
	MessageEvery, KillEvery, RestartEvery [2]time.Duration
	// Dir is the working directory (data, logs); it must exist.
	Dir string
	// Lisa returns a command that runs `lisa` with args.
	Lisa func(args ...string) *exec.Cmd
	// Homeserver names the homeserver the campaign runs against, one of
	// homeserver.Names(); empty means Dendrite.
	Homeserver string
	// DendriteBinary overrides the Dendrite binary (else the cached build,
	// or $LISA_DENDRITE_BIN); Dendrite only.
	DendriteBinary string
	// Progress, if set, receives one line per notable step.
	Progress io.Writer
	// Logger receives the harness's own diagnostics; they also go to
	// campaign.log in Dir, next to Lisa's lisa.log.
	Logger *slog.Logger
}

// Files a campaign writes into Config.Dir: its own log (progress and
// diagnostics) and every Lisa process's log, one after another, each
// begun by a "chaos: lisa launched" line. Neither holds a secret: Lisa's
// logger redacts hers, and the campaign logs no token.
const (
	CampaignLog = "campaign.log"
	LisaLog     = "lisa.log"
)

// CIConfig is the short campaign `go test ./chaos` runs.
func CIConfig(seed uint64, dir string, lisa func(args ...string) *exec.Cmd) Config {
	return Config{
		Seed: seed, Duration: 90 * time.Second, MaxDuration: 8 * time.Minute,
		Min:   Minimums{Invocations: 100, ActorFaults: 200, Kills: 20, HomeserverRestarts: 5, EachRelation: 3},
		Rooms: 3, ActorRate: 0.12, NetRate: 0.04,
		Kills:        map[string]float64{"after-sync-commit": 0.03, "before-send": 0.03, "after-send": 0.03},
		MessageEvery: [2]time.Duration{200 * time.Millisecond, 900 * time.Millisecond},
		KillEvery:    [2]time.Duration{3 * time.Second, 8 * time.Second},
		RestartEvery: [2]time.Duration{15 * time.Second, 25 * time.Second},
		Dir:          dir, Lisa: lisa,
	}
}

// dendriteLateStore is how long after receiving a send Dendrite may still
// store it: a restart that cuts its processing short leaves it to be
// redelivered after the roomserver queue's acknowledgement timeout of
// 5 min 10 s. Lisa's matrix.late_store_seconds default (330) matches it.
// See lateStoreWindow for the other servers.
const dendriteLateStore = 5*time.Minute + 30*time.Second

// lisaHold bounds how long Lisa holds a reply in doubt on a server whose
// transaction IDs she does not count on: matrix.late_store_seconds (330 s
// by default, which the campaign's configuration keeps) plus a margin.
const lisaHold = 5*time.Minute + 30*time.Second

const (
	genericError = "Sorry, I got tangled."
	lisaDevice   = "LISACHAOS"
)

// campaign is one running campaign.
type campaign struct {
	cfg    Config
	rng    *rand.Rand
	rngMu  sync.Mutex
	log    *slog.Logger
	report *Report

	hs  homeserver.Server
	llm *llmfake.Server
	// hsProxy is Lisa's link to the homeserver, with faults; hsDirect the
	// human's, which never injects any. Both follow the homeserver when a
	// restart moves it to another port.
	hsProxy  *Proxy
	hsDirect *Proxy
	llmProxy *Proxy
	bot      homeserver.Account
	human    *mautrix.Client
	rooms    []id.RoomID
	other    id.RoomID
	cfgPath  string
	dataDir  string

	// hsMu is held for writing while the homeserver restarts; human
	// traffic holds it for reading, so no human send is ever ambiguous.
	hsMu sync.RWMutex

	mu          sync.Mutex
	invocations map[id.EventID]id.RoomID // every mention Lisa must answer once
	sentInfo    map[id.EventID]string    // what each invocation was, and when
	chatter     map[id.EventID]bool      // messages Lisa must not answer
	lisaEvents  map[id.RoomID][]id.EventID
	faultTimes  []time.Time
	firstReply  []time.Time // reply observation times
	faultsEnd   time.Time   // when the fault phase ended
	lastRestart time.Time   // when the homeserver last came back
	typing      map[id.RoomID][]id.UserID
	proc        *lisaProc
	procs       []*lisaProc // every process started
	launches    int
	stopping    bool
	exits       map[string]int
	ownExits    exitCauses
	actorFaults map[string]int
	rel         relations
}

func (c *campaign) progress(format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	c.log.Info("progress", "step", text)
	if c.cfg.Progress != nil {
		fmt.Fprintf(c.cfg.Progress, "[chaos %s] %s\n", time.Now().UTC().Format("15:04:05"), text)
	}
}

func (c *campaign) between(r [2]time.Duration) time.Duration {
	c.rngMu.Lock()
	defer c.rngMu.Unlock()
	if r[1] <= r[0] {
		return r[0]
	}
	return r[0] + time.Duration(c.rng.Int64N(int64(r[1]-r[0])))
}

func (c *campaign) intn(n int) int {
	c.rngMu.Lock()
	defer c.rngMu.Unlock()
	return c.rng.IntN(n)
}

// Run runs a campaign and checks its invariants. The error is for a
// campaign that could not run (no homeserver, Lisa never started); a
// campaign that ran reports violations in its Report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Rooms < 1 || cfg.Lisa == nil || cfg.Dir == "" {
		return nil, errors.New("chaos: config needs rooms, a Lisa command and a directory")
	}
	logFile, err := os.OpenFile(filepath.Join(cfg.Dir, CampaignLog), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("chaos: campaign log: %w", err)
	}
	defer logFile.Close()
	logHandler := slog.Handler(slog.NewJSONHandler(logFile, nil))
	if cfg.Logger != nil {
		logHandler = slog.NewMultiHandler(cfg.Logger.Handler(), logHandler)
	}
	cfg.Logger = slog.New(logHandler)
	c := &campaign{
		cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x6c697361)), log: cfg.Logger,
		report:      &Report{Seed: cfg.Seed, Rooms: cfg.Rooms, NetFaults: map[string]int{}, Kills: map[string]int{}},
		invocations: map[id.EventID]id.RoomID{}, chatter: map[id.EventID]bool{}, sentInfo: map[id.EventID]string{},
		lisaEvents: map[id.RoomID][]id.EventID{}, typing: map[id.RoomID][]id.UserID{}, rel: newRelations(),
		exits: map[string]int{}, ownExits: exitCauses{}, actorFaults: map[string]int{},
	}
	c.report.LogDir = cfg.Dir
	defer c.explainExits()
	c.progress("seed %d: replay with `go run ./cmd/lisa-chaos --seed %d%s`", cfg.Seed, cfg.Seed, homeserverFlag(cfg.Homeserver))
	if err := c.setUp(ctx); err != nil {
		c.tearDown()
		return nil, err
	}
	defer c.tearDown()
	start := time.Now()
	if err := c.traffic(ctx); err != nil {
		return c.report, err
	}
	c.report.TrafficPhase = time.Since(start).Round(time.Second)
	if err := c.settle(ctx); err != nil {
		c.report.violate("settling: %v", err)
	}
	c.report.Duration = time.Since(start).Round(time.Second)
	return c.report, nil
}

// homeserverFlag is the --homeserver flag that replays a campaign against
// name ("" for the default, Dendrite).
func homeserverFlag(name string) string {
	if name == "" || name == homeserver.Dendrite {
		return ""
	}
	return " --homeserver " + name
}

func (c *campaign) setUp(ctx context.Context) error {
	name := c.cfg.Homeserver
	if name == "" {
		name = homeserver.Dendrite
	}
	if name == homeserver.Dendrite {
		c.progress("starting Dendrite (the first run builds it)")
	} else {
		c.progress("starting %s", name)
	}
	hs, err := homeserver.Launch(ctx, name, homeserver.Options{DataDir: filepath.Join(c.cfg.Dir, name),
		DendriteBinary: c.cfg.DendriteBinary, Logger: c.log})
	if err != nil {
		return err
	}
	c.hs = hs
	c.report.Homeserver, c.report.HomeserverVersion = hs.Name(), hs.Version()
	c.report.TxnIDsSurviveRestart = hs.TxnIDsSurviveRestart()
	c.progress("%s %s at %s (transaction IDs survive its restarts: %v)", hs.Name(), hs.Version(), hs.URL(), hs.TxnIDsSurviveRestart())
	if c.bot, err = hs.RegisterUser(ctx, "lisa", "lisa-chaos-password", lisaDevice); err != nil {
		return err
	}
	human, err := hs.RegisterUser(ctx, "human", "human-chaos-password", "HUMAN")
	if err != nil {
		return err
	}
	if c.hsDirect, err = NewProxy(hs.URL(), NetPlan{}); err != nil {
		return err
	}
	c.human, err = mautrix.NewClient(c.hsDirect.URL(), id.UserID(human.UserID), human.AccessToken)
	if err != nil {
		return err
	}
	botCli, err := mautrix.NewClient(c.hsDirect.URL(), id.UserID(c.bot.UserID), c.bot.AccessToken)
	if err != nil {
		return err
	}
	for i := range c.cfg.Rooms + 1 {
		r, err := c.human.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Name: fmt.Sprintf("chaos %d", i), Invite: []id.UserID{id.UserID(c.bot.UserID)}})
		if err != nil {
			return err
		}
		if _, err := botCli.JoinRoomByID(ctx, r.RoomID); err != nil {
			return err
		}
		if i < c.cfg.Rooms {
			c.rooms = append(c.rooms, r.RoomID)
		} else {
			c.other = r.RoomID
		}
	}
	c.llm = llmfake.New(llmfake.WithModels("chaos-model"), llmfake.WithDefault(llmfake.Func(func(r llmfake.Request) llmfake.Step {
		q := r.LastUser()
		return llmfake.Answer(fmt.Sprintf("Noted (%d characters of context).", len(q)))
	})))
	if err := c.llm.Listen(); err != nil {
		return err
	}
	if c.hsProxy, err = NewProxy(hs.URL(), NetPlan{Seed: c.cfg.Seed + 1, Rate: c.cfg.NetRate, MaxLatency: 1500 * time.Millisecond,
		Malform: []string{"next_batch", "rooms", "account_data"}, TypeOnly: []string{"rooms"}}); err != nil {
		return err
	}
	if c.llmProxy, err = NewProxy(strings.TrimSuffix(c.llm.URL(), "/v1"), NetPlan{Seed: c.cfg.Seed + 2, Rate: c.cfg.NetRate, MaxLatency: 1500 * time.Millisecond}); err != nil {
		return err
	}
	c.dataDir = filepath.Join(c.cfg.Dir, "data")
	c.cfgPath, err = c.writeConfig()
	return err
}

func (c *campaign) tearDown() {
	c.mu.Lock()
	c.stopping = true
	p := c.proc
	c.mu.Unlock()
	if p != nil {
		select {
		case <-p.done:
		default:
			p.kill()
		}
	}
	for _, px := range []*Proxy{c.hsProxy, c.hsDirect, c.llmProxy} {
		if px != nil {
			_ = px.Close()
		}
	}
	if c.llm != nil {
		c.llm.Close()
	}
	if c.hs != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = c.hs.Stop(ctx)
		cancel()
	}
}

func (c *campaign) writeConfig() (string, error) {
	var rooms []string
	for _, r := range c.rooms {
		rooms = append(rooms, fmt.Sprintf("%q", r))
	}
	if err := os.WriteFile(filepath.Join(c.cfg.Dir, "persona.md"), []byte("You are Lisa, brief and kind.\n"), 0o600); err != nil {
		return "", err
	}
	cfg := fmt.Sprintf(`# written by the chaos campaign (seed %d)
[matrix]
homeserver_url = %q
user_id = %q
device_id = %q
access_token = "env:LISA_MATRIX_ACCESS_TOKEN"
allowed_room_ids = [%s]
mention_aliases = ["Lisa", "@Lisa"]
sync_timeout_ms = 2000
sync_timeline_limit = 20
gap_page_limit = 20
# txn_ids_survive_restart stays "auto" (Lisa asks the server what it is:
# Synapse keeps transaction IDs across restarts, Dendrite does not) and
# late_store_seconds at its default, the hold where they do not survive.

[llm]
base_url = %q
model = "chaos-model"
request_timeout_seconds = 10

[persona]
path = "persona.md"
generic_error = %q
overload_error = "Too much at once."

[runtime]
data_dir = "data"
max_concurrent_rooms = 2
shutdown_grace_seconds = 5
invocation_timeout_seconds = 30
log_level = "info"
# The campaign's traffic is a flood by design: it checks exactly-once,
# not flood control, so nothing may be refused.
sender_rate_limit = 0
room_queue_limit = 1000
`, c.cfg.Seed, c.hsProxy.URL(), c.bot.UserID, c.bot.DeviceID, strings.Join(rooms, ", "), c.llmProxy.URL()+"/v1", genericError)
	path := filepath.Join(c.cfg.Dir, "lisa.toml")
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

// launch starts Lisa with a fresh per-launch plan (quiet: no faults).
func (c *campaign) launch(quiet bool) (*lisaProc, error) {
	c.mu.Lock()
	c.launches++
	n := c.launches
	c.mu.Unlock()
	plan := ActorPlan{Seed: mix(c.cfg.Seed + uint64(n)*0x9e3779b97f4a7c15)}
	if !quiet {
		plan.Rate, plan.Kills = c.cfg.ActorRate, c.cfg.Kills
	}
	cmd := c.cfg.Lisa("run", "--config", c.cfgPath)
	cmd.Dir = c.cfg.Dir
	cmd.Env = append(os.Environ(), "LISA_MATRIX_ACCESS_TOKEN="+c.bot.AccessToken, PlanEnv+"="+plan.Encode())
	p, err := startLisa(cmd, filepath.Join(c.cfg.Dir, LisaLog), n)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.proc = p
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p, nil
}

// supervise keeps Lisa running (as systemd would) until ctx ends, and
// accounts for every exit.
func (c *campaign) supervise(ctx context.Context) error {
	for {
		p, err := c.launch(false)
		if err != nil {
			return err
		}
		select {
		case <-p.done:
		case <-ctx.Done():
			return nil
		}
		c.account(p)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// account records why p ended and what it injected.
func (c *campaign) account(p *lisaProc) {
	cause := p.cause()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exits[cause]++
	for k, v := range p.faultCounts() {
		c.actorFaults[k] += v
	}
	c.report.HeldReplies += p.heldCount()
	if strings.HasPrefix(cause, "failpoint:") || cause == "sigkill" {
		c.report.Kills[strings.TrimPrefix(cause, "failpoint:")]++
		c.faultTimes = append(c.faultTimes, time.Now())
	}
	if own, ok := p.ownExit(); ok {
		c.ownExits.add(own, p.launch)
		c.log.Warn("lisa exited by herself", "status", own.Status, "cause", own.Name, "by_design", own.ByDesign,
			"detail", own.Detail, "launch", p.launch)
	}
}

// explainExits puts the causes of Lisa's own exits into the report; an
// exit that is not by design is a violation.
func (c *campaign) explainExits() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.report.OwnExits = c.ownExits.sorted()
	for _, e := range c.report.OwnExits {
		if !e.ByDesign {
			c.report.violate("lisa exited by herself %d times (%s, first at launch %d) for a reason not by design: %s: %s",
				e.Count, e.Status, e.FirstLaunch, e.Name, e.Detail)
		}
	}
}

func (c *campaign) counts() (inv, faults, kills, restarts int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.actorFaults {
		faults += n
	}
	if c.proc != nil {
		for _, n := range c.proc.faultCounts() {
			faults += n
		}
	}
	for _, n := range c.report.Kills {
		kills += n
	}
	return len(c.invocations), faults, kills, c.report.HomeserverRestarts
}

func (c *campaign) done(start time.Time) bool {
	if time.Since(start) < c.cfg.Duration {
		return false
	}
	inv, faults, kills, restarts := c.counts()
	m := c.cfg.Min
	return inv >= m.Invocations && faults >= m.ActorFaults && kills >= m.Kills && restarts >= m.HomeserverRestarts &&
		c.relationsDone(m.EachRelation)
}

// traffic is the fault phase: human messages, Lisa under actor faults and
// failpoint kills, random SIGKILLs, homeserver restarts and network faults.
func (c *campaign) traffic(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.hsProxy.Enable(true)
	c.llmProxy.Enable(true)
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	wg.Add(2)
	go func() { defer wg.Done(); errc <- c.supervise(ctx) }()
	go func() { defer wg.Done(); c.observe(ctx) }()
	// Messages from before Lisa's first sync are history, which she must
	// never answer: traffic and process faults start after her baseline.
	if err := c.awaitBaseline(ctx); err != nil {
		cancel()
		wg.Wait()
		return err
	}
	wg.Add(2)
	go func() { defer wg.Done(); c.killer(ctx) }()
	go func() { defer wg.Done(); c.restarter(ctx) }()
	err := c.humanTraffic(ctx, errc)
	cancel()
	wg.Wait()
	if err != nil {
		return err
	}
	c.endFaults()
	return nil
}

// humanTraffic posts human messages until the campaign is done or ran
// out of time. It returns the supervisor's error, or ctx's once it ends.
func (c *campaign) humanTraffic(ctx context.Context, errc <-chan error) error {
	start := time.Now()
	lastReport := start
	n := 0
	for !c.done(start) {
		if time.Since(start) > c.cfg.MaxDuration {
			inv, faults, kills, restarts := c.counts()
			c.report.violate("minimums not reached within %s: %d invocations, %d actor faults, %d kills, %d homeserver restarts",
				c.cfg.MaxDuration, inv, faults, kills, restarts)
			return nil
		}
		select {
		case err := <-errc:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.between(c.cfg.MessageEvery)):
		}
		n++
		if err := c.humanMessage(ctx, n); err != nil {
			c.log.Warn("human message failed", "err", err)
		}
		if time.Since(lastReport) > 15*time.Second {
			lastReport = time.Now()
			c.trafficProgress(start)
		}
	}
	return nil
}

// trafficProgress reports what the fault phase begun at start has done
// so far.
func (c *campaign) trafficProgress(start time.Time) {
	inv, faults, kills, restarts := c.counts()
	net := 0
	for _, px := range []*Proxy{c.hsProxy, c.llmProxy} {
		for _, n := range px.Counts() {
			net += n
		}
	}
	c.progress("%s: %d invocations, %d actor faults, %d network faults, %d kills, %d homeserver restarts",
		time.Since(start).Round(time.Second), inv, faults, net, kills, restarts)
}

// endFaults ends the fault phase once its goroutines have stopped: no
// more network faults, the last faulty Lisa stopped and accounted for,
// and the proxies' counts in the report.
func (c *campaign) endFaults() {
	c.hsProxy.Enable(false)
	c.llmProxy.Enable(false)
	c.mu.Lock()
	c.faultsEnd = time.Now()
	c.mu.Unlock()
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	// Graceful stop of the last faulty process (it may be dead already).
	select {
	case <-p.done:
	default:
		if err := p.stop(20 * time.Second); err != nil {
			c.log.Warn("stopping the last faulty lisa", "err", err)
		}
	}
	c.account(p)
	for k, v := range c.hsProxy.Counts() {
		c.report.NetFaults["homeserver:"+string(k)] += v
	}
	for k, v := range c.llmProxy.Counts() {
		c.report.NetFaults["llm:"+string(k)] += v
	}
	c.report.NetRequests = map[string]int64{"homeserver": c.hsProxy.Requests(), "llm": c.llmProxy.Requests()}
}

// awaitBaseline waits until a Lisa recorded the sync baseline.
func (c *campaign) awaitBaseline(ctx context.Context) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		c.mu.Lock()
		procs := slices.Clone(c.procs)
		c.mu.Unlock()
		refused, lastErr := 0, ""
		for _, p := range procs {
			select {
			case <-p.baseline:
				c.progress("Lisa recorded her sync baseline; traffic and faults begin")
				return nil
			default:
			}
			select {
			case <-p.done:
				if e := p.lastError(); e != "" {
					lastErr = e
					if strings.HasPrefix(e, "cannot start") {
						refused++
					}
				}
			default:
			}
		}
		// A Lisa that refuses to start (a missing pandoc, a bad
		// configuration) will not start the next time either.
		if refused >= 3 {
			return fmt.Errorf("chaos: lisa refused to start %d times; last: %s", refused, lastErr)
		}
		if time.Now().After(deadline) {
			if lastErr != "" {
				return fmt.Errorf("chaos: lisa never recorded a sync baseline; her last error: %s", lastErr)
			}
			return errors.New("chaos: lisa never recorded a sync baseline")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// humanMessage posts one message: mostly invocations of every kind, some
// chatter Lisa must ignore, sometimes in the room she may not answer.
func (c *campaign) humanMessage(ctx context.Context, n int) error {
	room := c.rooms[c.intn(len(c.rooms))]
	content := &event.MessageEventContent{MsgType: event.MsgText}
	invocation := true
	kind := "mention"
	switch r := c.intn(100); {
	case r < 20:
		// Threads, edits and redactions; a plain mention while the room
		// has nothing to relate to.
		if sent, err := c.relationMessage(ctx, room, n, c.intn(100)); sent || err != nil {
			return err
		}
		content.Body = fmt.Sprintf("Lisa, question %d: what do you think?", n)
		content.Mentions = &event.Mentions{UserIDs: []id.UserID{id.UserID(c.bot.UserID)}}
	case r < 50:
		content.Body = fmt.Sprintf("Lisa, question %d: what do you think?", n)
		content.Mentions = &event.Mentions{UserIDs: []id.UserID{id.UserID(c.bot.UserID)}}
	case r < 65:
		kind = "alias"
		content.Body = fmt.Sprintf("hey lisa, thought %d?", n)
	case r < 78:
		c.mu.Lock()
		evs := c.lisaEvents[room]
		c.mu.Unlock()
		if len(evs) == 0 {
			kind = "alias"
			content.Body = fmt.Sprintf("@Lisa number %d", n)
			break
		}
		kind = "reply to lisa"
		content.Body = fmt.Sprintf("and more on that (%d)", n)
		content.RelatesTo = &event.RelatesTo{InReplyTo: &event.InReplyTo{EventID: evs[c.intn(len(evs))]}}
	case r < 95:
		content.Body = fmt.Sprintf("just chatting among humans, %d", n)
		invocation = false
	default:
		room = c.other
		content.Body = fmt.Sprintf("Lisa, you may not answer here (%d)", n)
		content.Mentions = &event.Mentions{UserIDs: []id.UserID{id.UserID(c.bot.UserID)}}
		invocation = false
	}
	ev, err := c.send(ctx, room, content)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if invocation {
		c.invocations[ev] = room
		c.sentInfo[ev] = kind + " sent " + time.Now().UTC().Format("15:04:05.000")
	} else {
		c.chatter[ev] = true
	}
	if room != c.other {
		c.rel.human[room] = append(c.rel.human[room], ev)
		if !invocation {
			c.rel.plain[room] = append(c.rel.plain[room], ev)
		}
	}
	c.rel.kinds[kind]++
	c.mu.Unlock()
	return nil
}

// send posts as the human (see asHuman).
func (c *campaign) send(ctx context.Context, room id.RoomID, content *event.MessageEventContent) (ev id.EventID, err error) {
	err = c.asHuman(ctx, "chaos", func(ctx context.Context, txn string) error {
		resp, err := c.human.SendMessageEvent(ctx, room, event.EventMessage, content, mautrix.ReqSendEvent{TransactionID: txn})
		if err == nil {
			ev = resp.EventID
		}
		return err
	})
	return ev, err
}

// asHuman runs one request of the human's, retrying it with the same
// transaction ID (the homeserver is never restarted meanwhile, so retries
// are idempotent).
func (c *campaign) asHuman(ctx context.Context, prefix string, do func(ctx context.Context, txn string) error) error {
	c.hsMu.RLock()
	defer c.hsMu.RUnlock()
	txn := fmt.Sprintf("%s-%d-%d", prefix, c.cfg.Seed, time.Now().UnixNano())
	var last error
	for range 5 {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := do(sctx, txn)
		cancel()
		if err == nil {
			return nil
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return last
}

// killer SIGKILLs Lisa at random moments.
func (c *campaign) killer(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.between(c.cfg.KillEvery)):
		}
		c.mu.Lock()
		p := c.proc
		c.mu.Unlock()
		if p == nil {
			continue
		}
		select {
		case <-p.done:
		default:
			p.kill() // supervise accounts for it
		}
	}
}

// restarter restarts the homeserver (Dendrite forgets its transaction IDs
// then, Synapse keeps them).
func (c *campaign) restarter(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.between(c.cfg.RestartEvery)):
		}
		c.hsMu.Lock()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		before := c.hs.URL()
		err := c.hs.Restart(rctx)
		cancel()
		if err == nil && c.hs.URL() != before {
			err = c.follow(before)
		}
		c.hsMu.Unlock()
		if err != nil {
			if ctx.Err() == nil {
				c.log.Error("homeserver restart failed", "homeserver", c.hs.Name(), "err", err, "log_tail", c.hs.OutputTail())
				c.report.violate("homeserver restart failed: %v", err)
			}
			return
		}
		c.mu.Lock()
		c.report.HomeserverRestarts++
		c.faultTimes = append(c.faultTimes, time.Now())
		c.lastRestart = time.Now()
		c.mu.Unlock()
	}
}

// follow points both homeserver proxies at the homeserver's new URL: a
// restart moved it (Synapse does when its old port was taken meanwhile).
// Lisa and the human keep the proxies' URLs.
func (c *campaign) follow(before string) error {
	url := c.hs.URL()
	c.log.Warn("the homeserver moved on restart; the proxies follow it", "old", before, "new", url)
	c.mu.Lock()
	c.report.HomeserverMoves++
	c.mu.Unlock()
	for _, px := range []*Proxy{c.hsProxy, c.hsDirect} {
		if err := px.SetTarget(url); err != nil {
			return err
		}
	}
	return nil
}

// observe follows the rooms as the human: Lisa's messages (for replies to
// her and recovery times) and typing notifications.
func (c *campaign) observe(ctx context.Context) {
	since := ""
	for ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		resp, err := c.human.SyncRequest(sctx, 5000, since, "", false, event.PresenceOffline)
		cancel()
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond):
			}
			continue
		}
		first := since == ""
		since = resp.NextBatch
		now := time.Now()
		c.mu.Lock()
		for roomID, r := range resp.Rooms.Join {
			for _, ev := range r.Timeline.Events {
				if string(ev.Sender) == c.bot.UserID && ev.Type == event.EventMessage {
					c.lisaEvents[roomID] = append(c.lisaEvents[roomID], ev.ID)
					if !first {
						c.firstReply = append(c.firstReply, now)
					}
				}
			}
			for _, ev := range r.Ephemeral.Events {
				if ev.Type == event.EphemeralEventTyping {
					_ = ev.Content.ParseRaw(ev.Type)
					if tc := ev.Content.AsTyping(); tc != nil {
						c.typing[roomID] = slices.Clone(tc.UserIDs)
					}
				}
			}
		}
		c.mu.Unlock()
	}
}

// lisaTyping lists the rooms where Lisa was last seen typing.
func (c *campaign) lisaTyping() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for room, users := range c.typing {
		if slices.Contains(users, id.UserID(c.bot.UserID)) {
			out = append(out, string(room))
		}
	}
	slices.Sort(out)
	return out
}
