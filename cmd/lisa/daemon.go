package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/actors/app"
	"github.com/lisabot/lisa/actors/invocation"
	"github.com/lisabot/lisa/actors/orchestrate"
	"github.com/lisabot/lisa/actors/room"
	"github.com/lisabot/lisa/actors/syncer"
	"github.com/lisabot/lisa/actors/tools"
	"github.com/lisabot/lisa/adapters/admin"
	"github.com/lisabot/lisa/adapters/llm"
	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/adapters/metrics"
	"github.com/lisabot/lisa/adapters/pandoc"
	"github.com/lisabot/lisa/adapters/render"
	"github.com/lisabot/lisa/adapters/research"
	"github.com/lisabot/lisa/adapters/roomctx"
	"github.com/lisabot/lisa/adapters/search"
	"github.com/lisabot/lisa/adapters/web"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/persistence"
)

// snapshotInterval is how many journal events a room writes between
// snapshots (and compactions).
const snapshotInterval = 50

// daemon is Lisa's running core: the store and the actor tree.
type daemon struct {
	store       *persistence.Badger
	source      *matrix.Source
	sys         *app.System
	log         *slog.Logger
	grace       time.Duration
	rooms       []string
	invocations *sync.WaitGroup
	stopping    *atomic.Bool
	tools       *tools.Client
	admin       *admin.Server
	metrics     *metrics.Server
	crashable   bool
	// syncAgeLimit: without a successful sync for this long, Lisa is
	// degraded.
	syncAgeLimit time.Duration
}

// toolWorkers is the size of the tool pool: searches, downloads and
// conversions run at most this many at a time.
const toolWorkers = 4

// typingClearTimeout bounds the final "typing off" request.
const typingClearTimeout = 5 * time.Second

// sendTimeout bounds one reply send; a send in doubt reached the
// homeserver by its start plus this, if at all.
const sendTimeout = time.Minute

// daemonDeps are the outside parts a daemon talks to.
type daemonDeps struct {
	session *matrix.Client
	// invoker builds what answers an invocation, given the tool pool and
	// the metrics.
	invoker func(tools research.Runner, met *metrics.Metrics) invocation.Invoker
	// sender overrides the session as reply sender (failpoints wrap it).
	sender room.Sender
	hooks  *syncer.Hooks
	// crashable arms the test-only "crash <room>" admin command.
	crashable bool
	// kills are the armed failpoints (tests and chaos campaigns).
	kills kills
	// spawn, when set, wraps every actor spawn (chaos fault injection).
	spawn actor.SpawnMiddleware
	// leakCheck makes `lisa run` report leaked goroutines after a
	// graceful stop (chaos campaigns).
	leakCheck bool
	// fatal is called when part of the actor tree is gone for good; the
	// process should then exit non-zero so its supervisor restarts it.
	fatal func()
	// homeserverWasDown: the session check had to wait for the homeserver,
	// which may just have restarted.
	homeserverWasDown bool
}

// startDaemon opens the store and starts the actor tree for res.
func startDaemon(res config.Resolved, log *slog.Logger, deps daemonDeps) (*daemon, error) {
	cfg := res.Config
	store, err := persistence.OpenBadger(cfg.Runtime.DataDir, persistence.BadgerOptions{Logger: log})
	if err != nil {
		return nil, err
	}
	// Taken (and removed) before anything runs: if this run crashes, the
	// next start must not find the mark of the run before.
	clean, err := store.TakeCleanStop()
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	provider, err := persistence.NewProvider(store, snapshotInterval, log)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	sys := app.NewSystem(log)
	if deps.spawn != nil {
		sys.UseSpawnMiddleware(deps.spawn)
	}
	met := metrics.New(metrics.Sources{
		Actors: func() []metrics.ActorStat {
			var out []metrics.ActorStat
			for _, s := range sys.Registry.Snapshot(sys.Actors) {
				out = append(out, metrics.ActorStat{ID: messages.ActorLogID(s.ID), Mailbox: s.Len, Restarts: s.Restarts})
			}
			return out
		},
		LastSync: func() time.Time {
			if cur, err := store.Cursor(); err == nil && cur.GetUpdatedAtMs() > 0 {
				return time.UnixMilli(cur.GetUpdatedAtMs())
			}
			return time.Time{}
		},
		StoreBytes: store.Size,
	})
	rend := render.New()
	personaReply := func(text string) func(_, eventID string) []byte {
		return func(_, eventID string) []byte {
			b, err := rend.Reply(text, eventID)
			if err != nil { // cannot happen for a validated, non-empty message
				b, _ = json.Marshal(map[string]any{"msgtype": "m.text", "body": text,
					"m.relates_to": map[string]any{"m.in_reply_to": map[string]string{"event_id": eventID}}})
			}
			return b
		}
	}
	errorReply := personaReply(cfg.Persona.GenericError)
	sender := deps.sender
	if sender == nil {
		sender = deps.session
	}
	pool := tools.NewClient(sys.Root, sys.ToolsPID())
	source := matrix.NewSource(deps.session, matrix.SyncOptions{
		Timeout:       cfg.Matrix.SyncTimeout(),
		TimelineLimit: cfg.Matrix.SyncTimelineLimit,
		GapPageLimit:  cfg.Matrix.GapPageLimit,
		Aliases:       cfg.Matrix.MentionAliases,
		AllowedRooms:  cfg.Matrix.AllowedRoomIDs,
	}, store, log, time.Now)
	if cur, err := store.Cursor(); err == nil && cur.GetBaselineDone() && (!clean || deps.homeserverWasDown) {
		// A /sync may have failed in the run that crashed (the homeserver
		// restarting), and that knowledge died with it; or the homeserver
		// was just starting, when Dendrite may skip events in an answer.
		source.VerifyNext()
		msg := "the previous run did not stop cleanly: the first sync answer is checked room by room against the homeserver"
		if clean {
			msg = "the homeserver was not available at start: the first sync answer is checked room by room against it"
		}
		log.Info(msg, "rooms", len(cfg.Matrix.AllowedRoomIDs))
	}
	invocations := &sync.WaitGroup{}
	invoker := invocation.WithTyping(deps.invoker(pool, met), deps.session, invocation.TypingLease{
		Timeout: 30 * time.Second, Refresh: 20 * time.Second, ClearTimeout: typingClearTimeout,
		Background: invocations, // shutdown waits for typing to be cleared
	}, log)
	stopping := &atomic.Bool{}
	tree := sys.Tree(app.TreeConfig{
		OnLost: func(child string) {
			if stopping.Load() {
				return
			}
			log.Error("an essential actor stopped for good; exiting so Lisa can be restarted", "actor", child)
			if deps.fatal != nil {
				deps.fatal()
			}
		},
		Invocations: invocations,
		Rooms:       cfg.Matrix.AllowedRoomIDs, MaxConcurrent: cfg.Runtime.MaxConcurrentRooms,
		Policy: room.Policy{
			MaxAttempts: 3,
			RetryBase:   2 * time.Second, RetryMax: 30 * time.Second,
			SendRetryBase: time.Second, SendRetryMax: time.Minute,
			// Dendrite stores a send whose client gave up seconds
			// later after a restart or under load (see
			// docs/reliability.md): a reply is sent again only after
			// two lookups this far apart both missed it.
			SettleDelay: 5 * time.Second,
			// A send cut short by a homeserver restart can be stored
			// minutes later (Dendrite's queue redelivers it after
			// 5 min 10 s): matrix.late_store_seconds.
			LateStoreWindow: cfg.Matrix.LateStore(),
			RecheckEvery:    15 * time.Second,
			ErrorReply:      errorReply,
			// A flood in one room costs one overload reply per burst;
			// see docs/security.md.
			MaxQueue:      cfg.Runtime.RoomQueueLimit,
			SenderLimit:   cfg.Runtime.SenderRateLimit,
			SenderWindow:  cfg.Runtime.SenderRateWindow(),
			NoticeEvery:   cfg.Runtime.SenderRateWindow(),
			OverloadReply: personaReply(cfg.Persona.OverloadError),
		},
		Provider: provider, Inbox: store, BotEvents: store, Sender: sender,
		Invoker: invoker, InvocationTimeout: cfg.Runtime.InvocationTimeout(),
		ToolWorkers:  toolWorkers,
		SendTimeout:  sendTimeout,
		RoomRestarts: 3, RoomRestartWindow: time.Minute,
		RespawnBase: time.Second, RespawnMax: 5 * time.Minute,
		Sync: &app.SyncConfig{
			Source: source, Ledger: store,
			Watchdog: cfg.Matrix.SyncTimeout() + 60*time.Second,
			Backoff:  syncer.Backoff{Base: time.Second, Max: time.Minute, MaxRetryAfter: time.Minute},
			Jitter:   rand.Float64,
			Hooks:    deps.hooks,
			Observer: met.SyncDone,
		},
		Clock: app.RealClock{}, Logger: log,
		RoomOptions:  crashOptions(deps.crashable),
		RoomObserver: met,
	})
	if _, err := sys.Start(tree); err != nil {
		_ = store.Close()
		return nil, err
	}
	d := &daemon{crashable: deps.crashable, store: store, source: source, sys: sys, log: log, grace: cfg.Runtime.ShutdownGrace(),
		rooms: cfg.Matrix.AllowedRoomIDs, invocations: invocations, stopping: stopping, tools: pool,
		syncAgeLimit: 2*cfg.Matrix.SyncTimeout() + 10*time.Second}
	if cfg.Runtime.MetricsListen != "" {
		if d.metrics, err = metrics.Serve(cfg.Runtime.MetricsListen, met); err != nil {
			stopCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			_ = sys.Stop(stopCtx)
			_ = store.Close()
			return nil, err
		}
		log.Info("metrics served", "address", d.metrics.Addr())
	}
	if d.admin, err = admin.Listen(cfg.Runtime.AdminSocket, d, log); err != nil {
		if d.metrics != nil {
			_ = d.metrics.Close()
		}
		stopCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = sys.Stop(stopCtx)
		_ = store.Close()
		return nil, err
	}
	return d, nil
}

// stop shuts down in order within the grace period: no new intake, no new
// invocations; running invocations and sends get the rest of the grace
// period to finish; then everything left is stopped (cancelled attempts
// clear their typing on the way out) and the store closes. An attempt cut
// short is retried after the next start; a prepared reply is looked up on
// the homeserver and sent only if it is not there.
func (d *daemon) stop(ctx context.Context) error {
	// Keep part of the grace period for stopping the actors and closing
	// the store, so the whole shutdown fits in it.
	reserve := min(2*time.Second, d.grace/2)
	deadline := time.Now().Add(d.grace - reserve)
	d.stopping.Store(true)
	if d.admin != nil {
		_ = d.admin.Close()
	}
	if d.metrics != nil {
		_ = d.metrics.Close()
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	stopSync := d.sys.Root.StopFuture(d.sys.SyncPID())
	d.sys.Root.Send(d.sys.RoomsPID(), &messages.Drain{})
	syncErr := stopSync.Wait()
	for !d.idle() {
		select {
		case <-ctx.Done():
			d.log.Warn("shutdown grace period over; cancelling remaining work")
		case <-time.After(50 * time.Millisecond):
			continue
		}
		break
	}
	stopCtx, cancelStop := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancelStop()
	err := d.sys.Stop(stopCtx)
	// Let cancelled attempts run their clean-up (typing off), briefly.
	waited := make(chan struct{})
	go func() { d.invocations.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(typingClearTimeout + time.Second):
	}
	clean := syncErr == nil && d.cleanSync()
	if clean {
		if merr := d.store.MarkCleanStop(); merr != nil {
			clean = false
			if err == nil {
				err = merr
			}
		}
	}
	if cerr := d.store.Close(); err == nil {
		err = cerr
	}
	d.log.Info("lisa stopped", "clean", clean)
	return err
}

// cleanSync reports whether the next start may trust its first /sync: the
// sync has stopped, no check of an answer is pending, and the last checked
// answer was committed (the sync actor drops an answer that arrives while
// it stops, and a dropped checked answer takes its check with it).
func (d *daemon) cleanSync() bool {
	return !d.source.VerifyPending() && !d.source.UncommittedCheck()
}

// idle reports whether no room runs an invocation or delivers a reply.
func (d *daemon) idle() bool {
	res, err := d.sys.Root.RequestFuture(d.sys.RoomsPID(), &messages.SlotStatusRequest{}, time.Second).Result()
	if st, ok := res.(*messages.SlotStatus); err != nil || !ok || len(st.Holders) > 0 {
		return err != nil // rooms gone: nothing left to wait for
	}
	for _, room := range d.rooms {
		res, err := d.sys.Root.RequestFuture(d.sys.RoomPID(room), &messages.RoomStatusRequest{}, time.Second).Result()
		st, ok := res.(*messages.RoomStatus)
		if err == nil && ok && (st.Phase == "running" || st.Phase == "sending" || st.Phase == "reconciling") {
			return false
		}
	}
	return true
}

// answerer produces one reply: the room's context around the invocation,
// the LLM loop with its tools, and the renderer. Fallbacks are the
// persona's own words from the configuration.
type answerer struct {
	metrics  *metrics.Metrics // nil: not measured
	context  *roomctx.Builder
	research *research.Deps // nil: no tools
	llm      orchestrate.LLM
	tools    []orchestrate.Tool
	persona  string
	limits   orchestrate.Limits
	render   *render.Renderer
	generic  string
	overload string
}

func (a answerer) Invoke(ctx context.Context, c *roompb.Candidate, _ uint32) ([]byte, error) {
	start := time.Now()
	block, err := a.context.Build(ctx, c)
	if err != nil {
		return nil, err
	}
	llm := a.llm
	if a.metrics != nil {
		a.metrics.Phase("context", time.Since(start))
		llm = measuredLLM{next: a.llm, m: a.metrics}
	}
	tools := append([]orchestrate.Tool(nil), a.tools...) // never write into a.tools: it is shared
	if a.research != nil {
		// A fresh session per invocation: its own artifacts, sources and
		// known URLs. fetch_web_page fetches only URLs known to it: those
		// of the invoking message and the room context, then of search
		// results and fetched pages.
		sess := research.NewSession(*a.research)
		sess.AllowURLsIn(c.GetBody())
		sess.AllowURLsIn(block)
		tools = append(tools, sess.Tools()...)
	}
	if a.metrics != nil {
		for i, t := range tools {
			tools[i] = measuredTool{next: t, m: a.metrics}
		}
	}
	ans, err := orchestrate.Run(ctx, llm, tools, orchestrate.Prompt{Persona: a.persona, ContextBlock: block}, a.limits)
	if err != nil {
		return nil, err // transient failures are retried; the last attempt's failure becomes generic_error
	}
	markdown := ans.Markdown
	switch ans.Fallback {
	case orchestrate.FallbackGeneric:
		markdown, ans.SourceURLs = a.generic, nil
	case orchestrate.FallbackOverload:
		markdown, ans.SourceURLs = a.overload, nil
	}
	sources := make([]render.Source, 0, len(ans.SourceURLs))
	for _, u := range ans.SourceURLs {
		sources = append(sources, render.Source{URL: u, Title: ans.Titles[u]})
	}
	invoking := render.Invoking{EventID: c.GetEventId(), Sender: c.GetSender(), Body: c.GetBody()}
	content, err := a.render.Render(render.Answer{Markdown: markdown, Sources: sources, InReplyTo: invoking})
	if err != nil {
		// Nothing renderable (say, an answer with no visible text):
		// asking the model again would likely repeat it. Answer with the
		// persona's error instead.
		content, err = a.render.Render(render.Answer{Markdown: a.generic, InReplyTo: invoking})
		if err != nil {
			return nil, &messages.Error{Code: messages.CodeInternal, Message: "reply could not be rendered", Permanent: true}
		}
	}
	return content, nil
}

// measuredLLM counts requests and times them.
type measuredLLM struct {
	next orchestrate.LLM
	m    *metrics.Metrics
}

func (l measuredLLM) Chat(ctx context.Context, req orchestrate.ChatRequest) (orchestrate.ChatResponse, error) {
	start := time.Now()
	resp, err := l.next.Chat(ctx, req)
	l.m.Phase("llm", time.Since(start))
	if err != nil {
		l.m.LLMRequest(string(messages.ErrorCode(err)))
	} else {
		l.m.LLMRequest("ok")
	}
	return resp, err
}

// measuredTool counts calls, results and output bytes, and times them.
type measuredTool struct {
	next orchestrate.Tool
	m    *metrics.Metrics
}

func (t measuredTool) Spec() orchestrate.ToolSpec { return t.next.Spec() }

func (t measuredTool) Call(ctx context.Context, args json.RawMessage) orchestrate.ToolResult {
	start := time.Now()
	res := t.next.Call(ctx, args)
	t.m.Phase("tools", time.Since(start))
	result := "ok"
	if !res.OK {
		result = res.Code
	}
	t.m.ToolCall(t.next.Spec().Name, result, len(res.Content))
	return res
}

// newAnswerer builds the production answerer for res; its research tools
// run in pool, and it reports to met.
func newAnswerer(res config.Resolved, session *matrix.Client, log *slog.Logger, pool research.Runner, met *metrics.Metrics) answerer {
	cfg := res.Config
	deps := &research.Deps{
		Fetch: web.NewFetcher(web.Config{
			ConnectTimeout: cfg.Web.ConnectTimeout(), ReadTimeout: cfg.Web.ReadTimeout(), TotalTimeout: cfg.Web.TotalTimeout(),
			MaxRedirects: cfg.Web.MaxRedirects, MaxDownloadBytes: int64(cfg.Web.MaxDownloadBytes),
			UserAgent: cfg.Web.UserAgent, AllowPrivateAddresses: cfg.Web.AllowPrivateAddresses,
		}),
		Convert: pandoc.New(pandoc.Config{Timeout: cfg.Web.PandocTimeout(), MaxOutputBytes: 4 * cfg.Web.MaxToolOutputCharacters, Logger: log}),
		Runner:  pool,

		MaxToolOutputCharacters: cfg.Web.MaxToolOutputCharacters,
		MaxTotalArtifactBytes:   int64(cfg.Web.MaxTotalArtifactBytes),
	}
	if cfg.Search.Enabled() {
		deps.Search = search.New(search.Config{Endpoint: cfg.Search.Endpoint, APIKey: res.SearchAPIKey.Reveal(),
			MaxResults: cfg.Search.MaxResults, Timeout: cfg.Search.Timeout(), UserAgent: cfg.Web.UserAgent})
	}
	return answerer{
		metrics:  met,
		research: deps,
		context: roomctx.New(session, cfg.Matrix.UserID, roomctx.Limits{
			MaxEvents: cfg.Context.MaxEvents, MaxCharacters: cfg.Context.MaxCharacters,
			MaxEventCharacters: cfg.Context.MaxEventCharacters, MaxReplyDepth: cfg.Context.MaxReplyDepth,
		}).WithLogger(log),
		llm:     llmClient(cfg, res.LLMAPIKey.Reveal(), met),
		persona: res.Persona,
		limits: orchestrate.Limits{
			MaxIterations: cfg.LLM.MaxIterations, MaxToolCalls: cfg.LLM.MaxToolCalls,
			MaxRequestCharacters: cfg.LLM.MaxRequestCharacters, MaxResponseCharacters: cfg.LLM.MaxResponseCharacters,
			MaxToolOutputCharacters: cfg.Web.MaxToolOutputCharacters,
		},
		render:   render.New(),
		generic:  cfg.Persona.GenericError,
		overload: cfg.Persona.OverloadError,
	}
}

func llmClient(cfg config.Config, key string, met *metrics.Metrics) *llm.Client {
	return llm.New(llm.Config{
		OnRetry: met.LLMRetry,
		BaseURL: cfg.LLM.BaseURL, APIKey: key, Model: cfg.LLM.Model,
		MaxOutputTokens: cfg.LLM.MaxOutputTokens, Temperature: float32(cfg.LLM.Temperature),
		Timeout: cfg.LLM.RequestTimeout(), MaxResponseCharacters: cfg.LLM.MaxResponseCharacters,
		// One request per room with an active invocation.
		HTTPClient: &http.Client{Timeout: cfg.LLM.RequestTimeout(), Transport: pooledTransport(cfg.Runtime.MaxConcurrentRooms + 2)},
	})
}
