package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/adapters/logging"
	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/daemon"
	"github.com/lisabot/lisa/devkit/dendrite"
	"github.com/lisabot/lisa/devkit/llmscript"
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
	hs              *dendrite.Server
	lisaAcc, humAcc dendrite.Account
	human           *mautrix.Client
	room            id.RoomID
}

func runDemo(ctx context.Context, c *cli, exitAfter bool) error {
	out := c.stdout
	work, err := os.MkdirTemp("", "lisa-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	fmt.Fprintln(out, "[demo] preparing the local homeserver (the first run builds Dendrite; this takes a few minutes)")
	st, err := startDemoStack(ctx, work)
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = st.hs.Stop(stopCtx)
	}()
	res, llmURL, stopLLM, err := demoConfig(c, work, st)
	if err != nil {
		return err
	}
	defer stopLLM()
	log := logging.New(c.stderr, res.Config.Runtime.SlogLevel(), append(res.Secrets(), st.humAcc.AccessToken))
	session, err := matrix.Connect(ctx, res.Config.Matrix.HomeserverURL, res.Config.Matrix.UserID, res.Config.Matrix.DeviceID, res.MatrixAccessToken.Reveal(), daemon.MatrixHTTPClient(res.Config.Runtime))
	if err != nil {
		return err
	}
	d, err := daemon.Start(res, log, daemon.Deps{Session: session, Invoker: daemon.ProductionInvoker(res, log)(session)})
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), res.Config.Runtime.ShutdownGrace())
		defer cancel()
		_ = d.Stop(stopCtx)
	}()

	fmt.Fprintf(out, "[demo] homeserver %s, room %s, Lisa is %s, LLM %s\n", st.hs.URL(), st.room, st.lisaAcc.UserID, llmURL)
	if err := d.AwaitBaseline(ctx, time.Minute); err != nil {
		return err
	}
	if err := playConversation(ctx, st, session); err != nil {
		return err
	}
	if err := printTranscript(ctx, out, st.human, st.room); err != nil {
		return err
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

// startDemoStack launches Dendrite, registers Lisa and a human, and has
// the human create a room Lisa joins. The caller stops st.hs.
func startDemoStack(ctx context.Context, work string) (_ *demoStack, err error) {
	hs, err := dendrite.Launch(ctx, dendrite.Options{DataDir: filepath.Join(work, "dendrite")})
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
	if st.human, err = mautrix.NewClient(hs.URL(), id.UserID(st.humAcc.UserID), st.humAcc.AccessToken); err != nil {
		return nil, err
	}
	lisaCli, err := mautrix.NewClient(hs.URL(), id.UserID(st.lisaAcc.UserID), st.lisaAcc.AccessToken)
	if err != nil {
		return nil, err
	}
	created, err := st.human.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Name: "Lisa demo", Invite: []id.UserID{id.UserID(st.lisaAcc.UserID)}})
	if err != nil {
		return nil, fmt.Errorf("create room: %w", matrix.Classify(err))
	}
	st.room = created.RoomID
	if _, err := lisaCli.JoinRoomByID(ctx, created.RoomID); err != nil {
		return nil, fmt.Errorf("lisa joins: %w", matrix.Classify(err))
	}
	return st, nil
}

// demoConfig writes the persona and configuration files into work and
// loads them. The LLM is a real endpoint if the operator named one
// (LISA_DEMO_LLM_*), else the scripted model speaking the same wire
// format; stop ends the latter.
func demoConfig(c *cli, work string, st *demoStack) (res config.Resolved, llmURL string, stop func(), err error) {
	env := map[string]string{"LISA_MATRIX_ACCESS_TOKEN": st.lisaAcc.AccessToken}
	getenv := func(k string) string { v, _ := c.getenv(k); return v }
	llmURL, model := getenv("LISA_DEMO_LLM_URL"), getenv("LISA_DEMO_LLM_MODEL")
	keyLine, stop := `api_key = ""`, func() {}
	if llmURL == "" {
		fake := llmscript.New(llmscript.WithModels("lisa-demo-model"), llmscript.WithDefault(llmscript.Func(func(r llmscript.Request) llmscript.Step {
			return llmscript.Answer(fmt.Sprintf("Hello! You asked: *%s*\n\nI am running on a **scripted** model, so this is all I can say.", invocationText(r.LastUser())))
		})))
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
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(demoConfigTemplate, st.hs.URL(), st.lisaAcc.UserID, st.lisaAcc.DeviceID, st.room, llmURL, keyLine, model)), 0o600); err != nil {
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
// device, room, LLM URL, API key line and model.
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

[runtime]
data_dir = "data"
log_level = "warn"
`

// playConversation has the human greet the room, mention Lisa and reply
// to her answer, waiting for each of her replies.
func playConversation(ctx context.Context, st *demoStack, session *matrix.Client) error {
	say := func(body string, extra func(*event.MessageEventContent)) (string, error) {
		content := &event.MessageEventContent{MsgType: event.MsgText, Body: body}
		if extra != nil {
			extra(content)
		}
		resp, err := st.human.SendMessageEvent(ctx, st.room, event.EventMessage, content)
		if err != nil {
			return "", matrix.Classify(err)
		}
		return string(resp.EventID), nil
	}
	ask := func(body string, extra func(*event.MessageEventContent)) (string, error) {
		ev, err := say(body, extra)
		if err != nil {
			return "", err
		}
		return awaitReply(ctx, session, string(st.room), ev)
	}
	if _, err := say("Good morning, everyone!", nil); err != nil {
		return err
	}
	first, err := ask("Lisa, what can you do?", func(m *event.MessageEventContent) {
		m.Mentions = &event.Mentions{UserIDs: []id.UserID{id.UserID(st.lisaAcc.UserID)}}
	})
	if err != nil {
		return err
	}
	_, err = ask("And who wrote your persona?", func(m *event.MessageEventContent) {
		m.RelatesTo = &event.RelatesTo{InReplyTo: &event.InReplyTo{EventID: id.EventID(first)}}
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

// printTranscript prints the room's messages, oldest first.
func printTranscript(ctx context.Context, w io.Writer, cli *mautrix.Client, room id.RoomID) error {
	resp, err := cli.Messages(ctx, room, "", "", mautrix.DirectionBackward, &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}, 100)
	if err != nil {
		return matrix.Classify(err)
	}
	fmt.Fprintln(w, "\n--- transcript ---")
	for i := len(resp.Chunk) - 1; i >= 0; i-- {
		evt := resp.Chunk[i]
		body, _ := evt.Content.Raw["body"].(string)
		body = event.TrimReplyFallbackText(body)
		fmt.Fprintf(w, "%s: %s\n", evt.Sender, strings.ReplaceAll(body, "\n", "\n    "))
	}
	fmt.Fprintln(w, "--- end ---")
	return nil
}
