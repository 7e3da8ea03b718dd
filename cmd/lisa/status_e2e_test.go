package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"maunium.net/go/mautrix/event"

	"github.com/lisabot/lisa/adapters/status"
	"github.com/lisabot/lisa/testkit/need"
)

// strconvQuote quotes s as a JavaScript string literal.
func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// evilRoomName is a room name that would run script if the page put it
// in the document unescaped.
const evilRoomName = `<script>document.title="pwned"</script><img src=x onerror="document.title='pwned'">`

// Canaries: none of them may appear in the trail, the page or
// status.json.
const (
	canaryBody    = "CANARY-BODY-5a1e"
	canaryPrompt  = "CANARY-PROMPT-77c2"
	canaryKey     = "CANARY-KEY-91d0"
	canaryDisplay = "CANARY-DISPLAY-3b8f"
)

// freeAddr returns a loopback address with a free port.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func httpGet(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestStatusPageInChromium loads the status page of a running Lisa
// (against each homeserver) in headless Chromium, saves a screenshot, and checks
// from the rendered DOM that health, rooms and the trail are shown and
// that a room name holding <script> renders as text and runs nothing.
// It is also the canary test: no message body, prompt, token or display
// name appears in the page, status.json or the shell's trail.
func TestStatusPageInChromium(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		chromium := need.Chromium(t)
		e := newE2E(t, hs, 1)
		room := e.allowed[0]
		e.persona = "You are Lisa. " + canaryPrompt + "\n"
		e.llmKey = canaryKey
		if _, err := e.human.SendStateEvent(e.ctx, room, event.StateRoomName, "", &event.RoomNameEventContent{Name: evilRoomName}); err != nil {
			t.Fatal(err)
		}
		if err := e.human.SetDisplayName(e.ctx, canaryDisplay); err != nil {
			t.Fatal(err)
		}
		addr := freeAddr(t)
		p := e.start("LISA_RUNTIME__STATUS_LISTEN=" + addr)
		e.awaitLog(p, "sync baseline recorded")
		asked := e.mention(room, "Lisa, "+canaryBody+" what time is it?")
		e.awaitReply(room, asked)
		e.say(room, plainText("chatter "+canaryBody))
		e.awaitOutcome(asked)

		base := "http://" + addr
		resp, page := httpGet(t, base+"/")
		if csp := resp.Header.Get("Content-Security-Policy"); csp != status.CSP {
			t.Errorf("Content-Security-Policy = %q", csp)
		}
		_, js := httpGet(t, base+"/status.json")
		var pg status.Page
		if err := json.Unmarshal([]byte(js), &pg); err != nil {
			t.Fatalf("status.json: %v\n%s", err, js)
		}
		if pg.Health.Status == "" || len(pg.Rooms) != 1 || pg.Rooms[0].ID != string(room) || len(pg.Trail) == 0 || len(pg.Actors) == 0 {
			t.Errorf("status.json lacks data: %s", js)
		}
		trailOut := e.shell("trail 50\nwhy "+string(asked)+"\n", "--json")
		for what, text := range map[string]string{"page": page, "status.json": js, "shell trail": trailOut} {
			for _, c := range []string{canaryBody, canaryPrompt, canaryKey, canaryDisplay, e.bot.AccessToken} {
				if strings.Contains(text, c) {
					t.Errorf("%s contains the canary %q", what, c)
				}
			}
		}

		// The browser.
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
			chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(e.ctx, opts...)
		defer cancelAlloc()
		ctx, cancel := chromedp.NewContext(allocCtx)
		defer cancel()
		ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
		defer cancelT()

		// The room's name is read in the background: reload until it shows.
		var name string
		nameSel := `tr[data-room="` + string(room) + `"] td.name`
		deadline := time.Now().Add(60 * time.Second)
		for {
			if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitReady(chromedp.CSS("#rooms"))); err != nil {
				t.Fatalf("chromium: %v", err)
			}
			var err error
			if name, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(nameSel))); err != nil {
				t.Fatalf("chromium: %v", err)
			}
			if name == evilRoomName || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if name != evilRoomName {
			t.Fatalf("room name shown as %q, want the text %q", name, evilRoomName)
		}
		must := func(v string, err error) string {
			t.Helper()
			if err != nil {
				t.Fatalf("chromium: %v", err)
			}
			return v
		}
		count := func(sel string) int {
			t.Helper()
			n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconvQuote(sel)+`).length`))
			if err != nil {
				t.Fatalf("chromium: %v", err)
			}
			return n
		}
		title := must(chromedp.Run(ctx, chromedp.Title()))
		scripts, imgs, meters := count("script"), count("img"), count("#latency meter")
		health := must(chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#health [data-health]`))))
		outcome := must(chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#trail tr[data-event="`+string(asked)+`"] td.outcome`))))
		if title != "Lisa — status" || scripts != 0 || imgs != 0 {
			t.Errorf("the room name ran or became markup: title %q, %d script and %d img elements", title, scripts, imgs)
		}
		if health != "healthy" {
			t.Errorf("health shown as %q", health)
		}
		if outcome != "answered" {
			t.Errorf("the answered question's outcome shown as %q", outcome)
		}
		if meters != len(status.Histogram(nil)) {
			t.Errorf("%d latency bars", meters)
		}
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		dir := os.Getenv("LISA_SCREENSHOT_DIR")
		if dir == "" {
			dir = t.TempDir()
		}
		path := filepath.Join(dir, "status-page.png")
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		if len(shot) < 1000 {
			t.Errorf("screenshot of %d bytes", len(shot))
		}
		t.Logf("screenshot: %s (%d bytes)", path, len(shot))
	})
}
