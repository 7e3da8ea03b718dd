package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"

	"github.com/lisabot/lisa/devkit/demo"
	devdendrite "github.com/lisabot/lisa/devkit/dendrite"
	devsynapse "github.com/lisabot/lisa/devkit/synapse"
	hstest "github.com/lisabot/lisa/testkit/homeserver"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// demoRunCapture is what the test's demoObserver saw: the room's messages
// as the homeserver stores them (newest first) and the local servers'
// records.
type demoRunCapture struct {
	run    demo.Result
	events []*event.Event
	err    error
}

// demoRun is one finished run of the demo command.
type demoRun struct {
	code           int
	stdout, stderr string
	got            demoRunCapture
}

// runDemoCommand runs `lisa demo --exit-after-transcript`, with
// --homeserver hs unless hs is empty (the default, Dendrite), the demo's
// LISA_DEMO_* variables taken from demoEnv only (none: the scripted LLM),
// and reads the room back from the homeserver before the demo stops it.
func runDemoCommand(t *testing.T, hs string, demoEnv map[string]string) demoRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var got demoRunCapture
	observe := func(ctx context.Context, run demo.Result) {
		got.run = run
		resp, err := run.Human.Messages(ctx, run.Room, "", "", mautrix.DirectionBackward, &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}, 100)
		if err != nil {
			got.err = err
			return
		}
		for _, evt := range resp.Chunk {
			if err := evt.Content.ParseRaw(evt.Type); err != nil {
				got.err = err
				return
			}
		}
		got.events = resp.Chunk
	}
	var stdout, stderr bytes.Buffer
	env := func(k string) (string, bool) {
		if strings.HasPrefix(k, "LISA_DEMO_") {
			v, ok := demoEnv[k]
			return v, ok
		}
		return os.LookupEnv(k)
	}
	c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: env,
		demo: func(o *demo.Options) { o.Observer = observe }}
	args := []string{"demo", "--exit-after-transcript"}
	if hs != "" {
		args = append(args, "--homeserver", hs)
	}
	code := runWith(ctx, c, args)
	if got.err != nil || got.events == nil {
		t.Fatalf("reading the room back: %v (observer ran: %v; exit %d)\nstdout:\n%s\nstderr:\n%s", got.err, got.run.Human != nil, code, stdout.String(), stderr.String())
	}
	return demoRun{code: code, stdout: stdout.String(), stderr: stderr.String(), got: got}
}

// runDemoCaptured runs the demo on homeserver hs (empty: the default) with
// the scripted LLM and requires it to succeed without logging errors.
func runDemoCaptured(t *testing.T, hs string) (demoRunCapture, string) {
	t.Helper()
	r := runDemoCommand(t, hs, nil)
	if r.code != exitOK {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, `"level":"ERROR"`) {
		t.Fatalf("demo logged errors:\n%s", r.stderr)
	}
	return r.got, r.stdout
}

// replyTarget returns the event an event replies to, or "".
func replyTarget(evt *event.Event) string {
	rel, _ := evt.Content.Raw["m.relates_to"].(map[string]any)
	irt, _ := rel["m.in_reply_to"].(map[string]any)
	target, _ := irt["event_id"].(string)
	return target
}

// TestDemoEndToEnd runs the demo on each homeserver (testkit/homeserver
// List: Dendrite, the default, with no flag; Synapse with --homeserver
// synapse where it runs or is required) and the scripted LLM and checks,
// from the events the homeserver stores, that Lisa answered every question
// once; named Alice, the earlier speaker, when asked about the room; cited
// under Sources a page the local web site really served in this run; and
// answered a reply without a mention.
func TestDemoEndToEnd(t *testing.T) {
	for _, name := range hstest.List(t) {
		t.Run(name, func(t *testing.T) { testDemoEndToEnd(t, name) })
	}
}

// testDemoEndToEnd is TestDemoEndToEnd on the homeserver name.
func testDemoEndToEnd(t *testing.T, name string) {
	flag := name
	if name == hstest.Dendrite {
		flag = "" // the default: `lisa demo` unchanged
	}
	got, out := runDemoCaptured(t, flag)
	version := map[string]string{hstest.Dendrite: devdendrite.Version, hstest.Synapse: devsynapse.Version}[name]
	if want := "[demo] homeserver " + name + " " + version + " at http://127.0.0.1:"; !strings.Contains(out, want) {
		t.Fatalf("the demo does not name its homeserver (%q):\n%s", want, out)
	}
	replies := map[string][]*event.Event{} // question → Lisa's replies
	var questions []*event.Event
	for i := len(got.events) - 1; i >= 0; i-- {
		evt := got.events[i]
		switch string(evt.Sender) {
		case got.run.Lisa:
			replies[replyTarget(evt)] = append(replies[replyTarget(evt)], evt)
		case got.run.Bob:
			if strings.Contains(evt.Content.AsMessage().Body, "?") {
				questions = append(questions, evt)
			}
		}
	}
	if len(questions) != 4 { // the greeting also asks something, the rest ask Lisa
		t.Fatalf("%d questions stored, want 4", len(questions))
	}
	for _, q := range questions[1:] {
		if n := len(replies[string(q.ID)]); n != 1 {
			t.Fatalf("%d replies to %q, want 1", n, q.Content.AsMessage().Body)
		}
	}
	if n := len(replies[string(questions[0].ID)]); n != 0 {
		t.Fatalf("Lisa answered the greeting, which does not mention her (%d replies)", n)
	}
	checkNamesAlice(t, got, replies[string(questions[1].ID)][0])
	checkSourcesFetched(t, got, replies[string(questions[2].ID)][0])
	followUp := questions[3]
	if replyTarget(followUp) != string(replies[string(questions[2].ID)][0].ID) || strings.Contains(string(followUp.Content.VeryRaw), "m.mentions\":{\"user_ids") {
		t.Fatalf("the follow-up is not a plain reply to Lisa's research answer: %s", followUp.Content.VeryRaw)
	}
	if !strings.Contains(out, "--- transcript") || !strings.Contains(out, "tool calls: web_search ok ×1, fetch_web_page ok ×1, html_to_markdown ok ×1") {
		t.Fatalf("the transcript lacks the research invocation's summary:\n%s", out)
	}
	for _, c := range got.run.Checks {
		if !c.Passed() {
			t.Fatalf("self-check %q failed: %s", c.Name, c.Problem)
		}
	}
	if len(got.run.Checks) != 5 || !strings.Contains(out, "--- all 5 checks passed ---") {
		t.Fatalf("the demo did not report its self-check (%d checks):\n%s", len(got.run.Checks), out)
	}
}

// TestDemoFailsItsSelfCheck runs the demo against a model that rejects
// every request, so each question gets the persona's error: the demo
// must exit 1, name the failed check and show the log line that explains
// it, instead of passing while its showcase failed.
func TestDemoFailsItsSelfCheck(t *testing.T) {
	model := llmfake.Start(t, llmfake.WithModels("broken-model"),
		llmfake.WithDefault(llmfake.Error(http.StatusBadRequest, "this scripted model fails on purpose")))
	r := runDemoCommand(t, "", map[string]string{"LISA_DEMO_LLM_URL": model.URL(), "LISA_DEMO_LLM_MODEL": "broken-model"})
	if r.code != exitFailure {
		t.Fatalf("demo exited %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, exitFailure, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"FAILED  " + demo.CheckNoError + ": the answer to",
		"FAILED  " + demo.CheckSources + ": the research answer has no Sources list",
		`"code":"llm_rejected"`,
		"--- 2 of 5 checks failed ---",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "lisa demo: the showcase failed 2 check(s): "+demo.CheckNoError+"; "+demo.CheckSources) {
		t.Errorf("stderr does not name the failed checks:\n%s", r.stderr)
	}
	// The self-check's verdict matches the room: every question was
	// answered once, with the persona's error.
	var lisa int
	for _, evt := range r.got.events {
		if string(evt.Sender) == r.got.run.Lisa {
			lisa++
			if body := evt.Content.AsMessage().Body; !strings.Contains(body, "thoughts got tangled") {
				t.Errorf("Lisa answered %q, not the persona's error", body)
			}
		}
	}
	if lisa != 3 {
		t.Errorf("Lisa sent %d messages, want 3 error replies", lisa)
	}
}

// checkNamesAlice: the room question's answer names Alice by display
// name and user ID.
func checkNamesAlice(t *testing.T, got demoRunCapture, reply *event.Event) {
	t.Helper()
	body := reply.Content.AsMessage().Body
	if !strings.Contains(body, "Alice") || !strings.Contains(body, got.run.Alice) || !strings.Contains(body, "old NUC") {
		t.Fatalf("the answer about the room does not name Alice and what she said: %q", body)
	}
}

// checkSourcesFetched: the research answer has a Sources section whose
// every link was requested from the local web site in this run.
func checkSourcesFetched(t *testing.T, got demoRunCapture, reply *event.Event) {
	t.Helper()
	msg := reply.Content.AsMessage()
	_, sources, ok := strings.Cut(msg.FormattedBody, "Sources")
	if !ok {
		t.Fatalf("no Sources section in the research answer: %s", msg.FormattedBody)
	}
	var links []string
	for _, part := range strings.Split(sources, `href="`)[1:] {
		link, _, _ := strings.Cut(part, `"`)
		links = append(links, link)
	}
	if len(links) == 0 {
		t.Fatalf("the Sources section links nothing: %s", sources)
	}
	for _, l := range links {
		if !slices.Contains(got.run.Requested, l) {
			t.Fatalf("source %s was not fetched in this run (web site served %v)", l, got.run.Requested)
		}
		if !strings.Contains(msg.Body, l) {
			t.Fatalf("the plain body does not list source %s: %q", l, msg.Body)
		}
	}
	if len(got.run.Queries) == 0 {
		t.Fatal("the local SearXNG was never queried")
	}
}

// TestDemoMissingPrerequisite: what the demo needs is checked before
// anything starts; a missing piece ends the demo at once with exit code 2,
// naming it and the command that provides it.
func TestDemoMissingPrerequisite(t *testing.T) {
	// No go command, and no Dendrite built: the first run cannot build it.
	t.Setenv("PATH", t.TempDir())
	t.Setenv(devdendrite.CacheDirEnv, t.TempDir())
	t.Setenv(devdendrite.BinaryEnv, "")
	missingTarball := filepath.Join(t.TempDir(), "no-such-synapse.tar.gz")
	cases := []struct {
		name   string
		args   []string          // after "demo --exit-after-transcript"
		env    map[string]string // the demo's LISA_DEMO_* variables
		setenv map[string]string // the process environment
		want   []string
		absent []string
	}{
		{name: "no go, no Dendrite", want: []string{
			"lisa demo: missing the go command, to build the local homeserver (Dendrite " + devdendrite.Version + ") on the first run\n",
			"    fix: install Go "}},
		{name: "a real model without its name", env: map[string]string{"LISA_DEMO_LLM_URL": "http://127.0.0.1:9/v1"}, want: []string{
			"lisa demo: missing LISA_DEMO_LLM_MODEL", "    fix: export LISA_DEMO_LLM_MODEL=", "lisa demo: missing the go command"}},
		// On Synapse, a missing tarball is named with its fix; what
		// building Dendrite needs (the go command) is not asked for.
		{name: "synapse without its tarball", args: []string{"--homeserver", "synapse"},
			setenv: map[string]string{devsynapse.TarballEnv: missingTarball}, want: []string{
				"lisa demo: missing the Synapse " + devsynapse.Version + " source tarball, to run the local homeserver: no source tarball at " + devsynapse.TarballEnv + "=" + missingTarball + " (no such file or directory)\n",
				"    fix: export " + devsynapse.TarballEnv + "=<path of synapse-" + devsynapse.Version + ".tar.gz>",
				"or run the demo on Dendrite (without --homeserver synapse)\n"},
			absent: []string{"go command"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.setenv {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			env := func(k string) (string, bool) {
				if strings.HasPrefix(k, "LISA_DEMO_") {
					v, ok := c.env[k]
					return v, ok
				}
				return os.LookupEnv(k)
			}
			code := run(t.Context(), append([]string{"demo", "--exit-after-transcript"}, c.args...), strings.NewReader(""), &stdout, &stderr, env)
			if code != exitUsage {
				t.Fatalf("demo exited %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitUsage, stdout.String(), stderr.String())
			}
			for _, w := range c.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			for _, w := range c.absent {
				if strings.Contains(stderr.String(), w) {
					t.Errorf("stderr has %q:\n%s", w, stderr.String())
				}
			}
			if stdout.Len() != 0 {
				t.Errorf("the demo started something before failing its prerequisites:\n%s", stdout.String())
			}
		})
	}
}

// TestDemoWithoutPandoc runs the demo on a PATH that holds the go command
// and nothing else: with no pandoc, the demo says it uses the built-in
// converter, and the research answer still carries Sources it fetched.
func TestDemoWithoutPandoc(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := t.TempDir()
	if err := os.Symlink(goCmd, filepath.Join(bin, "go")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	if _, err := exec.LookPath("pandoc"); err == nil {
		t.Fatal("pandoc is still on PATH")
	}
	got, out := runDemoCaptured(t, "")
	if !strings.Contains(out, "built-in converter") {
		t.Fatalf("the demo does not say it uses the built-in converter:\n%s", out)
	}
	var research *event.Event
	for _, evt := range got.events {
		if string(evt.Sender) == got.run.Lisa && strings.Contains(evt.Content.AsMessage().Body, "I looked it up") {
			research = evt
		}
	}
	if research == nil {
		t.Fatalf("no research answer in the room:\n%s", out)
	}
	checkSourcesFetched(t, got, research)
	if !strings.Contains(out, "--- all 5 checks passed ---") {
		t.Fatalf("the self-check did not pass:\n%s", out)
	}
}

// TestDemoUnknownHomeserver: --homeserver takes only the servers the demo
// can launch; another name is a usage error that lists them.
func TestDemoUnknownHomeserver(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"demo", "--homeserver", "conduit"}, strings.NewReader(""), &stdout, &stderr, os.LookupEnv)
	if code != exitUsage || stdout.Len() != 0 {
		t.Fatalf("demo exited %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitUsage, stdout.String(), stderr.String())
	}
	for _, w := range []string{`lisa demo: unknown homeserver "conduit" for --homeserver (known: dendrite, synapse)`, "usage: lisa demo [--homeserver dendrite|synapse]"} {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
		}
	}
}
