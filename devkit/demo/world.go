package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/devkit/dendrite"
	"github.com/lisabot/lisa/devkit/homeserver"
	"github.com/lisabot/lisa/devkit/llmscript"
	"github.com/lisabot/lisa/devkit/searx"
	"github.com/lisabot/lisa/devkit/synapse"
	"github.com/lisabot/lisa/devkit/webpages"
)

// Demo accounts. The human's password is printed so a person can log in
// with a real client; it only exists on a throwaway local homeserver.
const (
	humanPassword = "demo-password-1"
	lisaDevice    = "LISADEMO"
)

// stack is the demo's local homeserver, accounts and room.
type stack struct {
	hs                     homeserver.Server
	lisaAcc, humAcc, alice homeserver.Account
	human, aliceCli        *mautrix.Client
	room                   id.RoomID
}

// web is the demo's local stand-in for the internet: a SearXNG JSON API
// whose results point at a small web site on this machine.
type web struct {
	search *searx.Server
	site   *webpages.Server
}

// startWeb starts the local web site and the SearXNG fake indexing
// its pages.
func startWeb() (*web, error) {
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
	return &web{search: search, site: site}, nil
}

// launchWithProgress launches the named homeserver ([homeserver.Dendrite]
// or [homeserver.Synapse]) on dataDir, printing the current start-up step
// and the time spent so far every ten seconds, so the first run's build
// (Dendrite) or unpacking (Synapse) is not a silent wait.
func launchWithProgress(ctx context.Context, out io.Writer, name, dataDir string) (homeserver.Server, error) {
	began := time.Now()
	var mu sync.Mutex
	step := "preparing the local homeserver (" + name + ")"
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
	hs, err := launch(ctx, name, dataDir, progress)
	close(done)
	<-finished
	if err == nil {
		fmt.Fprintf(out, "[demo] homeserver %s %s ready after %s\n", hs.Name(), hs.Version(), time.Since(began).Round(100*time.Millisecond))
	}
	return hs, err
}

// launch starts the named homeserver on dataDir. Dendrite is launched
// directly, so that its first-run build reports its steps to progress;
// Synapse through [homeserver.Launch], with one step line.
func launch(ctx context.Context, name, dataDir string, progress func(string)) (homeserver.Server, error) {
	opts := homeserver.Options{DataDir: dataDir}
	if name == homeserver.Dendrite {
		do := opts.Dendrite()
		do.Progress = progress
		s, err := dendrite.Launch(ctx, do)
		if err != nil {
			return nil, err
		}
		return homeserver.DendriteServer{Server: s}, nil
	}
	progress("starting Synapse " + synapse.Version + " (its source is unpacked into the cache on the first run)")
	return homeserver.Launch(ctx, name, opts)
}

// startStack launches the named homeserver, registers Lisa and two people (the
// human the demo speaks for, "Bob", and "Alice"), and has Bob create a
// room the others join. The caller stops st.hs.
func startStack(ctx context.Context, work, name string, out io.Writer) (_ *stack, err error) {
	hs, err := launchWithProgress(ctx, out, name, filepath.Join(work, name))
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
	st := &stack{hs: hs}
	if st.lisaAcc, err = hs.RegisterUser(ctx, "lisa", "lisa-password-1", lisaDevice); err != nil {
		return nil, err
	}
	if st.humAcc, err = hs.RegisterUser(ctx, "human", humanPassword, "HUMANDEMO"); err != nil {
		return nil, err
	}
	if st.alice, err = hs.RegisterUser(ctx, "alice", "alice-password-1", "ALICEDEMO"); err != nil {
		return nil, err
	}
	var lisaCli *mautrix.Client
	for _, u := range []struct {
		acc  homeserver.Account
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

// writeConfig writes the persona and configuration files into work and
// loads them. The LLM is a real endpoint if the operator named one
// (LISA_DEMO_LLM_*), else the scripted model speaking the same wire
// format; stop ends the latter.
func writeConfig(lookup config.LookupEnv, work string, st *stack, w *web, conv converterChoice) (res config.Resolved, llmURL string, stop func(), err error) {
	env := map[string]string{"LISA_MATRIX_ACCESS_TOKEN": st.lisaAcc.AccessToken}
	getenv := func(k string) string { v, _ := lookup(k); return v }
	llmURL, model := getenv("LISA_DEMO_LLM_URL"), getenv("LISA_DEMO_LLM_MODEL")
	keyLine, stop := `api_key = ""`, func() {}
	if llmURL == "" {
		fake := llmscript.New(llmscript.WithModels("lisa-demo-model"), llmscript.WithDefault(llmscript.Func(scriptedModel)))
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
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(configTemplate, st.hs.URL(), st.lisaAcc.UserID, st.lisaAcc.DeviceID, st.room, llmURL, keyLine, model, w.search.URL(), conv.setting)), 0o600); err != nil {
		return res, "", stop, err
	}
	res, err = config.LoadAndResolve(cfgPath, func(k string) (string, bool) {
		if v, ok := env[k]; ok {
			return v, true
		}
		return lookup(k)
	})
	if err != nil {
		return res, "", stop, fmt.Errorf("demo configuration: %w", err)
	}
	return res, llmURL, stop, nil
}

// configTemplate is the demo's configuration file: homeserver, user,
// device, room, LLM URL, API key line, model, search endpoint and the
// converter line of [web] (see [chooseConverter]).
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
const configTemplate = `[matrix]
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
%s

[runtime]
data_dir = "data"
log_level = "info"
`
