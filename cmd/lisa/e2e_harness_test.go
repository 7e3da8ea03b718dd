package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/chaos"
	"github.com/lisabot/lisa/devkit/demo"
	"github.com/lisabot/lisa/testkit/homeserver"
	"github.com/lisabot/lisa/testkit/llmfake"
	"github.com/lisabot/lisa/testkit/need"
)

// childEnv makes the test binary act as `lisa` (see TestMain), so crash
// tests can run Lisa as a real process and SIGKILL it.
const childEnv = "LISA_E2E_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(childEnv); args != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		// A test build of Lisa: its failpoints are armed from the
		// environment (the production binary has none).
		c := &cli{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.LookupEnv, arm: chaos.Arm(os.LookupEnv)}
		code := runWith(ctx, c, strings.Fields(args))
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// e2e is a homeserver, a scripted LLM, Lisa's and a human's accounts and
// rooms, and Lisa as a subprocess.
type e2e struct {
	t       *testing.T
	ctx     context.Context
	hs      homeserver.Server
	hsURL   string // what Lisa talks to (may be a fault proxy)
	llm     *llmfake.Server
	bot     homeserver.Account
	human   *mautrix.Client
	humanID id.UserID
	allowed []id.RoomID
	other   id.RoomID // Lisa is a member but it is not allowed
	dir     string
	proc    *lisaProc
	maxConc int
	// timelineLimit is matrix.sync_timeline_limit.
	timelineLimit int
	// device overrides the configured device ID (to test the whoami check).
	device string
	// extraConfig is appended to the configuration file (more sections).
	extraConfig string
	// persona overrides the persona file's text; llmKey sets llm.api_key
	// (through the environment).
	persona, llmKey string
	// dataDir overrides runtime.data_dir ("data", next to the config).
	dataDir string
	// llmURL and model override llm.base_url (the scripted model's) and
	// llm.model ("m"), for a real LLM server.
	llmURL, model string
	// replyWait bounds awaitReply (90 s when zero).
	replyWait time.Duration
}

// onEachHomeserver runs f as a subtest per homeserver of
// homeserver.List ("dendrite", "synapse"; LISA_HOMESERVERS picks), with
// the server's name for newE2E. The end-to-end tests run on every server:
// what differs between them is asked of the server
// (homeserver.Server.TxnIDsSurviveRestart), never assumed.
func onEachHomeserver(t *testing.T, f func(t *testing.T, hs string)) {
	t.Helper()
	for _, name := range homeserver.List(t) {
		t.Run(name, func(t *testing.T) { f(t, name) })
	}
}

// newE2E starts the homeserver named hs (with its rate limits raised) and
// the scripted LLM, registers Lisa and a human, and makes allowedRooms
// rooms Lisa may answer in plus one she is in but may not.
func newE2E(t *testing.T, hs string, allowedRooms int) *e2e {
	t.Helper()
	return newE2EWith(t, hs, homeserver.Options{}, allowedRooms)
}

// newE2EWith is newE2E with the homeserver's options (e.g. its default
// rate limits kept).
func newE2EWith(t *testing.T, hs string, opts homeserver.Options, allowedRooms int) *e2e {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	e := &e2e{t: t, ctx: ctx, dir: t.TempDir(), maxConc: 2, timelineLimit: 50}
	e.hs = homeserver.Start(t, hs, opts)
	e.hsURL = e.hs.URL()
	bot, err := e.hs.RegisterUser(ctx, "lisa", "lisa-password-1", "LISATEST")
	if err != nil {
		t.Fatal(err)
	}
	e.bot = bot
	human, err := e.hs.RegisterUser(ctx, "human", "human-password-1", "HUMAN")
	if err != nil {
		t.Fatal(err)
	}
	e.humanID = id.UserID(human.UserID)
	e.human, _ = mautrix.NewClient(e.hs.URL(), e.humanID, human.AccessToken)
	botCli, _ := mautrix.NewClient(e.hs.URL(), id.UserID(bot.UserID), bot.AccessToken)
	for i := range allowedRooms + 1 {
		r, err := e.human.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Name: fmt.Sprintf("room %d", i), Invite: []id.UserID{id.UserID(bot.UserID)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := botCli.JoinRoomByID(ctx, r.RoomID); err != nil {
			t.Fatal(err)
		}
		if i < allowedRooms {
			e.allowed = append(e.allowed, r.RoomID)
		} else {
			e.other = r.RoomID
		}
	}
	e.llm = llmfake.Start(t, llmfake.WithModels("m"), llmfake.WithDefault(llmfake.Func(func(r llmfake.Request) llmfake.Step {
		return llmfake.Answer("answer: " + demo.InvocationText(r.LastUser()))
	})))
	return e
}

func (e *e2e) writeConfig() string {
	e.t.Helper()
	var rooms []string
	for _, r := range e.allowed {
		rooms = append(rooms, fmt.Sprintf("%q", r))
	}
	persona := "You are Lisa, brief and kind.\n"
	if e.persona != "" {
		persona = e.persona
	}
	keyLine := ""
	if e.llmKey != "" {
		keyLine = `api_key = "env:LISA_LLM_API_KEY"`
	}
	if err := os.WriteFile(filepath.Join(e.dir, "persona.md"), []byte(persona), 0o600); err != nil {
		e.t.Fatal(err)
	}
	dataDir := "data"
	if e.dataDir != "" {
		dataDir = e.dataDir
	}
	device := e.bot.DeviceID
	if e.device != "" {
		device = e.device
	}
	llmURL, model := e.llm.URL(), "m"
	if e.llmURL != "" {
		llmURL = e.llmURL
	}
	if e.model != "" {
		model = e.model
	}
	cfg := fmt.Sprintf(`[matrix]
homeserver_url = %q
user_id = %q
device_id = %q
access_token = "env:LISA_MATRIX_ACCESS_TOKEN"
allowed_room_ids = [%s]
mention_aliases = ["Lisa", "@Lisa"]
sync_timeout_ms = 2000
sync_timeline_limit = %d
gap_page_limit = 5

[llm]
base_url = %q
model = %q
%s
request_timeout_seconds = 30

[persona]
path = "persona.md"
generic_error = "Sorry, I got tangled."
overload_error = "Too much at once."

[runtime]
data_dir = %q
max_concurrent_rooms = %d
shutdown_grace_seconds = 5
invocation_timeout_seconds = 60
log_level = "info"
`, e.hsURL, e.bot.UserID, device, strings.Join(rooms, ", "), e.timelineLimit, llmURL, model, keyLine, dataDir, e.maxConc)
	cfg += e.extraConfig
	path := filepath.Join(e.dir, "lisa.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// lisaProc is Lisa running as a subprocess.
type lisaProc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	logs   []string
	events chan string // log "msg" values, as they appear
	done   chan struct{}
}

// start runs `lisa run` with extra environment entries.
func (e *e2e) start(env ...string) *lisaProc {
	e.t.Helper()
	cfg := e.writeConfig()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=run --config "+cfg, "LISA_MATRIX_ACCESS_TOKEN="+e.bot.AccessToken, "LISA_LLM_API_KEY="+e.llmKey,
		need.ConverterEnv(e.t)) // any converter will do: the built-in one where pandoc is missing
	cmd.Env = append(cmd.Env, env...)
	return e.launch(cmd)
}

// launch starts cmd as Lisa, collecting its log, and kills it when the
// test ends.
func (e *e2e) launch(cmd *exec.Cmd) *lisaProc {
	e.t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	p := &lisaProc{cmd: cmd, events: make(chan string, 1000), done: make(chan struct{})}
	go p.collect(stderr)
	e.t.Cleanup(func() { p.kill() })
	e.proc = p
	return p
}

// awaitLog waits for a log message containing s.
func (e *e2e) awaitLog(p *lisaProc, s string) {
	e.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case msg := <-p.events:
			if strings.Contains(msg, s) {
				return
			}
		case <-p.done:
			e.t.Fatalf("lisa exited while waiting for %q; logs:\n%s", s, p.text())
		case <-deadline:
			e.t.Fatalf("timed out waiting for log %q; logs:\n%s", s, p.text())
		}
	}
}

func (p *lisaProc) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.logs, "\n")
}

// wait waits for the process to exit and returns its wait status.
func (p *lisaProc) wait(t *testing.T) syscall.WaitStatus {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("lisa did not exit; logs:\n%s", p.text())
	}
	_ = p.cmd.Wait()
	return p.cmd.ProcessState.Sys().(syscall.WaitStatus)
}

func (p *lisaProc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		_ = p.cmd.Wait()
	}
}

// say posts a message as the human and returns its event ID.
func (e *e2e) say(room id.RoomID, content *event.MessageEventContent) id.EventID {
	e.t.Helper()
	resp, err := e.human.SendMessageEvent(e.ctx, room, event.EventMessage, content)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.EventID
}

func (e *e2e) mention(room id.RoomID, body string) id.EventID {
	return e.say(room, &event.MessageEventContent{MsgType: event.MsgText, Body: body,
		Mentions: &event.Mentions{UserIDs: []id.UserID{id.UserID(e.bot.UserID)}}})
}

func plainText(body string) *event.MessageEventContent {
	return &event.MessageEventContent{MsgType: event.MsgText, Body: body}
}

// lisaEvents returns Lisa's m.room.message events in room, redacted ones
// included, read twice (pages of 100 and of 61) and counted once each:
// Dendrite's backward pagination skips the events that share their depth
// with a page's last event but were not on it (see adapters/matrix
// scanPageSizes), and pages of two sizes rarely end at the same depth.
func (e *e2e) lisaEvents(room id.RoomID) map[id.EventID]*event.Event {
	e.t.Helper()
	out := map[id.EventID]*event.Event{}
	for _, size := range []int{100, 61} {
		from := ""
		for range 20 * 100 / size {
			resp, err := e.human.Messages(e.ctx, room, from, "", mautrix.DirectionBackward, &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}, size)
			if err != nil {
				e.t.Fatal(err)
			}
			for _, evt := range resp.Chunk {
				if string(evt.Sender) == e.bot.UserID {
					out[evt.ID] = evt
				}
			}
			if resp.End == "" || len(resp.Chunk) == 0 {
				break
			}
			from = resp.End
		}
	}
	return out
}

// replies returns, per invoking event, how many replies Lisa has in room.
func (e *e2e) replies(room id.RoomID) map[id.EventID]int {
	e.t.Helper()
	out := map[id.EventID]int{}
	for _, evt := range e.lisaEvents(room) {
		out[inReplyTo(evt)]++
	}
	return out
}

// inReplyTo returns the event evt replies to ("" if none).
func inReplyTo(evt *event.Event) id.EventID {
	var c struct {
		Rel struct {
			IRT struct {
				EventID id.EventID `json:"event_id"`
			} `json:"m.in_reply_to"`
		} `json:"m.relates_to"`
	}
	_ = json.Unmarshal(evt.Content.VeryRaw, &c)
	return c.Rel.IRT.EventID
}

// awaitReply waits until Lisa answered ev in room at least once.
func (e *e2e) awaitReply(room id.RoomID, ev id.EventID) {
	e.t.Helper()
	wait := e.replyWait
	if wait == 0 {
		wait = 90 * time.Second
	}
	deadline := time.Now().Add(wait)
	for e.replies(room)[ev] == 0 {
		if time.Now().After(deadline) {
			logs := ""
			if e.proc != nil {
				logs = e.proc.text()
			}
			e.t.Fatalf("no reply to %s; logs:\n%s", ev, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// settle posts a sentinel mention and waits for its reply. A room answers
// in order, so once the sentinel is answered every earlier invocation has
// reached its final reply count: any duplicate would have been sent
// before it.
func (e *e2e) settle(room id.RoomID) id.EventID {
	e.t.Helper()
	ev := e.mention(room, "sentinel: are you done?")
	e.awaitReply(room, ev)
	return ev
}

// expectReplies checks the exact reply count per invoking event.
func (e *e2e) expectReplies(room id.RoomID, want map[id.EventID]int) {
	e.t.Helper()
	got := e.replies(room)
	total := 0
	for ev, n := range got {
		total += n
		if want[ev] != n {
			e.t.Errorf("replies to %s = %d, want %d", ev, n, want[ev])
		}
	}
	for ev, n := range want {
		if got[ev] != n {
			e.t.Errorf("replies to %s = %d, want %d", ev, got[ev], n)
		}
	}
	if e.t.Failed() {
		e.t.Fatalf("reply counts %v; logs:\n%s", got, e.proc.text())
	}
}
