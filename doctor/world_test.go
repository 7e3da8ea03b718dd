package doctor_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/doctor"
	"github.com/lisabot/lisa/testkit/homeserver"
	"github.com/lisabot/lisa/testkit/llmfake"
	"github.com/lisabot/lisa/testkit/searxfake"
)

// Secrets of the test world; none may appear in doctor's output.
const (
	llmKey    = "sk-doctor-llm-key-4711"
	searchKey = "searx-doctor-key-0815"
)

// world is a real homeserver with Lisa's account and rooms in every state
// the rooms check tells apart, a scripted LLM server and a fake SearXNG.
type world struct {
	t     *testing.T
	ctx   context.Context
	hs    homeserver.Server
	bot   homeserver.Account
	llm   *llmfake.Server
	searx *searxfake.Server
	// Rooms: joined and fine; not joined; encrypted; Lisa's level too low
	// to send; too low to redact.
	good, notJoined, encrypted, mute, noRedact id.RoomID
}

func newWorld(t *testing.T, hs homeserver.Server) *world {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	w := &world{t: t, ctx: ctx, hs: hs}
	var err error
	if w.bot, err = w.hs.RegisterUser(ctx, "lisa", "lisa-password-1", "LISATEST"); err != nil {
		t.Fatal(err)
	}
	human, err := w.hs.RegisterUser(ctx, "human", "human-password-1", "HUMAN")
	if err != nil {
		t.Fatal(err)
	}
	hc, _ := mautrix.NewClient(w.hs.URL(), id.UserID(human.UserID), human.AccessToken)
	bc, _ := mautrix.NewClient(w.hs.URL(), id.UserID(w.bot.UserID), w.bot.AccessToken)
	room := func(join bool, req *mautrix.ReqCreateRoom) id.RoomID {
		req.Preset = "private_chat"
		req.Invite = []id.UserID{id.UserID(w.bot.UserID)}
		r, err := hc.CreateRoom(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if join {
			if _, err := bc.JoinRoomByID(ctx, r.RoomID); err != nil {
				t.Fatal(err)
			}
		}
		return r.RoomID
	}
	levels := func(events map[string]int) *event.PowerLevelsEventContent {
		return &event.PowerLevelsEventContent{Users: map[id.UserID]int{id.UserID(human.UserID): 100}, Events: events}
	}
	w.good = room(true, &mautrix.ReqCreateRoom{Name: "good"})
	w.notJoined = room(false, &mautrix.ReqCreateRoom{Name: "invited only"})
	w.encrypted = room(true, &mautrix.ReqCreateRoom{Name: "secret", InitialState: []*event.Event{{Type: event.StateEncryption,
		Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}}}}})
	w.mute = room(true, &mautrix.ReqCreateRoom{Name: "mute", PowerLevelOverride: levels(map[string]int{"m.room.message": 50})})
	w.noRedact = room(true, &mautrix.ReqCreateRoom{Name: "no redact", PowerLevelOverride: levels(map[string]int{"m.room.redaction": 50})})

	w.startFakes()
	return w
}

// startFakes starts the world's scripted LLM server and fake SearXNG.
func (w *world) startFakes() {
	w.llm = llmfake.Start(w.t, llmfake.WithModels("small-model", "m"), llmfake.WithAPIKey(llmKey), llmfake.WithDefault(llmfake.Func(obedientModel)))
	w.searx = searxfake.Start(w.t, searxfake.WithAPIKey(searchKey), searxfake.WithDefault(searxfake.Results(
		searxfake.Result{URL: "https://matrix.example/chat", Title: "Matrix", Content: "open chat"})))
}

// obedientModel calls the tool it is offered (doctor's test tool) and
// answers with an answer object once the tool's result is back, or when
// no tool is offered.
func obedientModel(r llmfake.Request) llmfake.Step {
	if len(r.Tools) > 0 && len(r.Messages) > 0 && r.Messages[len(r.Messages)-1].Role != "tool" {
		return llmfake.ToolCalls(llmfake.Call(r.Tools[0].Name, map[string]string{"word": "kiwi"}))
	}
	return llmfake.Answer("kiwi")
}

// setup is one configuration of the world.
type setup struct {
	rooms  []id.RoomID
	device string // matrix.device_id; Lisa's own when empty
	model  string // llm.model; "m" when empty
	token  string // the access token in the environment; Lisa's when empty
	// dataDir is runtime.data_dir; "data" beside the file when empty.
	dataDir string
	extra   string // appended to the file
}

// write writes the configuration and persona into a new directory and
// returns the file's path and the environment with its secrets.
func (w *world) write(s setup) (string, func(string) (string, bool)) {
	w.t.Helper()
	dir := w.t.TempDir()
	if s.device == "" {
		s.device = w.bot.DeviceID
	}
	if s.model == "" {
		s.model = "m"
	}
	if s.token == "" {
		s.token = w.bot.AccessToken
	}
	if s.dataDir == "" {
		s.dataDir = "data"
	}
	path := writeConfig(w.t, dir, fmt.Sprintf(`[matrix]
homeserver_url = %q
user_id = %q
device_id = %q
access_token = "env:LISA_MATRIX_ACCESS_TOKEN"
allowed_room_ids = [%s]
mention_aliases = ["Lisa"]

[llm]
base_url = %q
model = %q
api_key = "env:LISA_LLM_API_KEY"

[search]
endpoint = %q
api_key = "env:LISA_SEARCH_API_KEY"

[persona]
path = "persona.md"

[runtime]
data_dir = %q
%s`, w.hs.URL(), w.bot.UserID, s.device, quoteRooms(s.rooms), w.llm.URL(), s.model, w.searx.URL(), s.dataDir, s.extra))
	env := map[string]string{"LISA_MATRIX_ACCESS_TOKEN": s.token, "LISA_LLM_API_KEY": llmKey, "LISA_SEARCH_API_KEY": searchKey}
	return path, func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// writeConfig writes text as lisa.toml, and a persona file, into dir.
func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "persona.md"), []byte("You are Lisa.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "lisa.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func quoteRooms(rooms []id.RoomID) string {
	q := make([]string, len(rooms))
	for i, r := range rooms {
		q[i] = fmt.Sprintf("%q", r)
	}
	return strings.Join(q, ", ")
}

// run runs the doctor on path with env, only the given sections.
func run(t *testing.T, path string, env func(string) (string, bool), only ...string) doctor.Report {
	t.Helper()
	rep, err := doctor.Run(context.Background(), doctor.Options{ConfigPath: path, Getenv: env, Only: only})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// text is the report as lines "status section message — fix".
func text(rep doctor.Report) string {
	var b strings.Builder
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "%s %s %s — %s\n", r.Status, r.Section, r.Message, r.Fix)
	}
	return b.String()
}

// find returns the results of section that contain substr.
func find(rep doctor.Report, section, substr string) []doctor.Result {
	var out []doctor.Result
	for _, r := range rep.Results {
		if r.Section == section && strings.Contains(r.Message, substr) {
			out = append(out, r)
		}
	}
	return out
}
