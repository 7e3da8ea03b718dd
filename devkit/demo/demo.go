package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/actors/invocation"
	"github.com/lisabot/lisa/actors/tools"
	"github.com/lisabot/lisa/adapters/logging"
	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/adapters/metrics"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/daemon"
	"github.com/lisabot/lisa/devkit/homeserver"
)

// Options configure [Run].
type Options struct {
	// Out receives the demo's progress lines and the transcript.
	Out io.Writer
	// Log receives Lisa's warnings and errors as JSON lines.
	Log io.Writer
	// Getenv looks up LISA_DEMO_LLM_URL, LISA_DEMO_LLM_MODEL and
	// LISA_DEMO_LLM_KEY (a real model instead of the scripted one) and
	// whatever the configuration refers to.
	Getenv config.LookupEnv
	// Homeserver names the local homeserver the conversation runs on:
	// [homeserver.Dendrite] (also when empty) or [homeserver.Synapse].
	Homeserver string
	// ExitAfterTranscript stops everything after the transcript; otherwise
	// the demo keeps running until ctx ends.
	ExitAfterTranscript bool
	// Observer, if set, sees the finished run after the transcript and
	// before anything stops. Tests read the room back through it.
	Observer func(ctx context.Context, r Result)
}

// Result is what a finished run shows its [Options.Observer].
type Result struct {
	// Human is Bob's client, the person the demo speaks for.
	Human *mautrix.Client
	// Room is the demo's room.
	Room id.RoomID
	// Lisa, Bob and Alice are the user IDs of the room's members.
	Lisa, Bob, Alice string
	// Requested lists the URLs the local web site served, in order.
	Requested []string
	// Queries lists the queries the local SearXNG answered, in order.
	Queries []string
	// Checks is the outcome of the self-check.
	Checks []Check
}

// Run runs the demo: a local homeserver ([Options.Homeserver]), a room with two people, a scripted
// (or real) model, a local search engine and web site, and Lisa's actor
// tree on a fresh Badger directory; it plays the conversation, prints the
// transcript and checks, from the events the homeserver stores, that the
// showcase worked. A failed check makes Run return a [*CheckError] (after
// printing which check failed and the log line that explains it), also
// when the demo would otherwise keep running. Everything it started is
// stopped when it returns.
func Run(ctx context.Context, opts Options) error {
	out := opts.Out
	hsName := opts.Homeserver
	if hsName == "" {
		hsName = homeserver.Dendrite
	}
	if !slices.Contains(homeserver.Names(), hsName) {
		return fmt.Errorf("unknown homeserver %q (known: %s)", hsName, strings.Join(homeserver.Names(), ", "))
	}
	work, err := os.MkdirTemp("", "lisa-demo-")
	if err != nil {
		return &PrerequisiteError{Missing: []Missing{{What: fmt.Sprintf("a writable temporary directory for the demo's files (%v)", err), Fix: "export TMPDIR=/tmp"}}}
	}
	defer os.RemoveAll(work)
	if missing := checkPrerequisites(ctx, thisHost(opts.Getenv), work, hsName); len(missing) > 0 {
		return &PrerequisiteError{Missing: missing}
	}
	conv := chooseConverter(ctx, func(ctx context.Context) (string, error) { return daemon.CheckPandoc(ctx, config.Default()) })
	fmt.Fprintln(out, conv.note)

	st, err := startStack(ctx, work, hsName, out)
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = st.hs.Stop(stopCtx)
	}()
	w, err := startWeb()
	if err != nil {
		return err
	}
	defer w.search.Close()
	defer w.site.Close()
	res, llmURL, stopLLM, err := writeConfig(opts.Getenv, work, st, w, conv)
	if err != nil {
		return err
	}
	defer stopLLM()
	logs := &logTap{forward: opts.Log}
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

	fmt.Fprintf(out, "[demo] homeserver %s %s at %s, room %s, Lisa is %s, LLM %s\n", st.hs.Name(), st.hs.Version(), st.hs.URL(), st.room, st.lisaAcc.UserID, llmURL)
	fmt.Fprintf(out, "[demo] local SearXNG %s and web site %s stand in for the internet\n", w.search.URL(), w.site.Pages()[0].URL)
	if err := d.AwaitBaseline(ctx, time.Minute); err != nil {
		return err
	}
	p, err := playConversation(ctx, st, session, probe, out)
	if err != nil {
		return err
	}
	events, err := storedMessages(ctx, st.human, st.room)
	if err != nil {
		return err
	}
	printTranscript(out, events, probe.summaries())
	checks := selfCheck(checkInput{lisa: id.UserID(st.lisaAcc.UserID), events: events, played: p,
		errorTexts: []string{res.Config.Persona.GenericError, res.Config.Persona.OverloadError},
		fetched:    w.site.Requested(), logs: logs.all()})
	failed := printChecks(out, checks)
	if opts.Observer != nil {
		opts.Observer(ctx, Result{Human: st.human, Room: st.room, Lisa: st.lisaAcc.UserID, Bob: st.humAcc.UserID,
			Alice: st.alice.UserID, Requested: w.site.Requested(), Queries: w.search.Queries(), Checks: checks})
	}
	if len(failed) > 0 {
		return &CheckError{Failed: failed}
	}
	if opts.ExitAfterTranscript {
		return nil
	}
	fmt.Fprintf(out, "\n[demo] running. Join with any Matrix client:\n  homeserver: %s (%s %s)\n  user:       %s\n  password:   %s\n  room:       %s\nPress Ctrl-C to stop.\n",
		st.hs.URL(), st.hs.Name(), st.hs.Version(), st.humAcc.UserID, humanPassword, st.room)
	<-ctx.Done()
	fmt.Fprintln(out, "[demo] stopping")
	return nil
}
