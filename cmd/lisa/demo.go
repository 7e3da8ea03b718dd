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

	"github.com/lisabot/lisa/actors/invocation"
	"github.com/lisabot/lisa/adapters/logging"
	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/adapters/metrics"
	"github.com/lisabot/lisa/adapters/research"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/testkit/dendrite"
	"github.com/lisabot/lisa/testkit/llmfake"
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

func runDemo(ctx context.Context, c *cli, exitAfter bool) error {
	out := c.stdout
	work, err := os.MkdirTemp("", "lisa-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	fmt.Fprintln(out, "[demo] preparing the local homeserver (the first run builds Dendrite; this takes a few minutes)")
	hs, err := dendrite.Launch(ctx, dendrite.Options{DataDir: filepath.Join(work, "dendrite")})
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = hs.Stop(stopCtx)
	}()
	lisaAcc, err := hs.RegisterUser(ctx, "lisa", "lisa-password-1", demoLisaDevice)
	if err != nil {
		return err
	}
	humanAcc, err := hs.RegisterUser(ctx, "human", demoHumanPassword, "HUMANDEMO")
	if err != nil {
		return err
	}
	human, err := mautrix.NewClient(hs.URL(), id.UserID(humanAcc.UserID), humanAcc.AccessToken)
	if err != nil {
		return err
	}
	lisaCli, err := mautrix.NewClient(hs.URL(), id.UserID(lisaAcc.UserID), lisaAcc.AccessToken)
	if err != nil {
		return err
	}
	created, err := human.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Name: "Lisa demo", Invite: []id.UserID{id.UserID(lisaAcc.UserID)}})
	if err != nil {
		return fmt.Errorf("create room: %w", matrix.Classify(err))
	}
	roomID := string(created.RoomID)
	if _, err := lisaCli.JoinRoomByID(ctx, created.RoomID); err != nil {
		return fmt.Errorf("lisa joins: %w", matrix.Classify(err))
	}

	// The LLM: a real endpoint if the operator named one, else the
	// scripted fake speaking the same wire format.
	env := map[string]string{"LISA_MATRIX_ACCESS_TOKEN": lisaAcc.AccessToken}
	getenv := func(k string) string { v, _ := c.getenv(k); return v }
	llmURL, model := getenv("LISA_DEMO_LLM_URL"), getenv("LISA_DEMO_LLM_MODEL")
	keyLine := `api_key = ""`
	if llmURL == "" {
		fake := llmfake.New(llmfake.WithModels("lisa-demo-model"), llmfake.WithDefault(llmfake.Func(func(r llmfake.Request) llmfake.Step {
			return llmfake.Answer(fmt.Sprintf("Hello! You asked: *%s*\n\nI am running on a **scripted** model, so this is all I can say.", invocationText(r.LastUser())))
		})))
		if err := fake.Listen(); err != nil {
			return err
		}
		defer fake.Close()
		llmURL, model = fake.URL(), "lisa-demo-model"
	} else if key := getenv("LISA_DEMO_LLM_KEY"); key != "" {
		env["LISA_DEMO_LLM_KEY"] = key
		keyLine = `api_key = "env:LISA_DEMO_LLM_KEY"`
	}
	if model == "" {
		return fmt.Errorf("LISA_DEMO_LLM_URL is set but LISA_DEMO_LLM_MODEL is not")
	}

	persona := "You are Lisa, a warm and concise helper in a small private room. You answer in short paragraphs."
	if err := os.WriteFile(filepath.Join(work, "persona.md"), []byte(persona+"\n"), 0o600); err != nil {
		return err
	}
	cfgText := fmt.Sprintf(`[matrix]
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
`, hs.URL(), lisaAcc.UserID, lisaAcc.DeviceID, roomID, llmURL, keyLine, model)
	cfgPath := filepath.Join(work, "lisa.toml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		return err
	}
	res, err := config.LoadAndResolve(cfgPath, func(k string) (string, bool) {
		if v, ok := env[k]; ok {
			return v, true
		}
		return c.getenv(k)
	})
	if err != nil {
		return fmt.Errorf("demo configuration: %w", err)
	}
	level := res.Config.Runtime.SlogLevel()
	log := logging.New(c.stderr, level, append(res.Secrets(), humanAcc.AccessToken))

	session, err := matrix.Connect(ctx, res.Config.Matrix.HomeserverURL, res.Config.Matrix.UserID, res.Config.Matrix.DeviceID, res.MatrixAccessToken.Reveal(), matrixHTTPClient(res.Config.Runtime))
	if err != nil {
		return err
	}
	d, err := startDaemon(res, log, daemonDeps{
		session: session,
		invoker: func(pool research.Runner, met *metrics.Metrics) invocation.Invoker {
			return newAnswerer(res, session, log, pool, met)
		},
	})
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), res.Config.Runtime.ShutdownGrace())
		defer cancel()
		_ = d.stop(stopCtx)
	}()

	fmt.Fprintf(out, "[demo] homeserver %s, room %s, Lisa is %s, LLM %s\n", hs.URL(), roomID, lisaAcc.UserID, llmURL)
	if err := awaitBaseline(ctx, d); err != nil {
		return err
	}
	say := func(body string, extra func(*event.MessageEventContent)) (string, error) {
		content := &event.MessageEventContent{MsgType: event.MsgText, Body: body}
		if extra != nil {
			extra(content)
		}
		resp, err := human.SendMessageEvent(ctx, created.RoomID, event.EventMessage, content)
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
		return awaitReply(ctx, session, roomID, ev)
	}
	if _, err := say("Good morning, everyone!", nil); err != nil {
		return err
	}
	first, err := ask("Lisa, what can you do?", func(m *event.MessageEventContent) {
		m.Mentions = &event.Mentions{UserIDs: []id.UserID{id.UserID(lisaAcc.UserID)}}
	})
	if err != nil {
		return err
	}
	if _, err := ask("And who wrote your persona?", func(m *event.MessageEventContent) {
		m.RelatesTo = &event.RelatesTo{InReplyTo: &event.InReplyTo{EventID: id.EventID(first)}}
	}); err != nil {
		return err
	}
	if err := printTranscript(ctx, out, human, created.RoomID); err != nil {
		return err
	}
	if exitAfter {
		return nil
	}
	fmt.Fprintf(out, "\n[demo] running. Join with any Matrix client:\n  homeserver: %s\n  user:       %s\n  password:   %s\n  room:       %s\nPress Ctrl-C to stop.\n",
		hs.URL(), humanAcc.UserID, demoHumanPassword, roomID)
	<-ctx.Done()
	fmt.Fprintln(out, "[demo] stopping")
	return nil
}

// awaitBaseline waits (bounded) until Lisa's first sync recorded its
// baseline: messages before it are history and are never answered.
func awaitBaseline(ctx context.Context, d *daemon) error {
	deadline := time.Now().Add(time.Minute)
	for {
		cur, err := d.store.Cursor()
		if err != nil {
			return err
		}
		if cur.GetBaselineDone() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Lisa's first sync did not complete within a minute")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
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
