package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lisabot/lisa/adapters/logging"
	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/daemon"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// benchAnswer is the scripted LLM's instant answer.
const benchAnswer = "Pong. This is the benchmark's **scripted** answer."

// startBenchLLM starts the instant scripted LLM.
func startBenchLLM(trace func(arrived, answered time.Time)) (*llmfake.Server, error) {
	opts := []llmfake.Option{llmfake.WithModels("bench-model"), llmfake.WithDefault(llmfake.Answer(benchAnswer))}
	if trace != nil {
		opts = append(opts, llmfake.WithTrace(trace))
	}
	fake := llmfake.New(opts...)
	if err := fake.Listen(); err != nil {
		return nil, err
	}
	return fake, nil
}

// benchTarget is the homeserver account Lisa runs as in a bench phase.
type benchTarget struct {
	url, user, device, token string
}

// benchLisa is one Lisa daemon started for a bench phase, configured like
// production except for its sizes.
type benchLisa struct {
	d       *daemon.Daemon
	session *matrix.Client
	sends   *sendClock
}

// arrivals pairs reply arrivals with the invocations they answer. An
// arrival nobody waits for yet is kept until someone does, so the order
// of expect and deliver does not matter.
type arrivals struct {
	mu      sync.Mutex
	waiters map[string]chan time.Time
	early   map[string]time.Time
	all     chan time.Time // every arrival, when set
}

func newArrivals(all chan time.Time) *arrivals {
	return &arrivals{waiters: map[string]chan time.Time{}, early: map[string]time.Time{}, all: all}
}

// expect returns where the arrival of the reply to eventID is delivered.
func (a *arrivals) expect(eventID string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	a.mu.Lock()
	defer a.mu.Unlock()
	if at, ok := a.early[eventID]; ok {
		delete(a.early, eventID)
		ch <- at
		return ch
	}
	a.waiters[eventID] = ch
	return ch
}

func (a *arrivals) deliver(eventID string, at time.Time) {
	a.mu.Lock()
	if ch := a.waiters[eventID]; ch != nil {
		delete(a.waiters, eventID)
		ch <- at
	} else if a.all == nil {
		a.early[eventID] = at
	}
	a.mu.Unlock()
	if a.all != nil {
		a.all <- at
	}
}

// sendClock is an HTTP transport that notes when Lisa puts each reply on
// the wire (by the invoking event it answers); the bench uses it where the
// homeserver cannot report arrivals itself (Dendrite).
type sendClock struct {
	next http.RoundTripper
	*arrivals
}

func newSendClock(next http.RoundTripper) *sendClock {
	return &sendClock{next: next, arrivals: newArrivals(nil)}
}

func (c *sendClock) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/send/m.room.message/") && r.GetBody != nil {
		at := time.Now()
		if body, err := r.GetBody(); err == nil {
			b, _ := io.ReadAll(body)
			_ = body.Close()
			c.deliver(inReplyTo(b), at)
		}
	}
	return c.next.RoundTrip(r)
}

// inReplyTo returns the event a reply's content answers.
func inReplyTo(content []byte) string {
	var c struct {
		RelatesTo struct {
			InReplyTo struct {
				EventID string `json:"event_id"`
			} `json:"m.in_reply_to"`
		} `json:"m.relates_to"`
	}
	_ = json.Unmarshal(content, &c)
	return c.RelatesTo.InReplyTo.EventID
}

// startBenchLisa writes a configuration for rooms under work and starts
// Lisa's daemon against hs and the LLM at llmURL. The configuration goes
// through the same loader and validation as `lisa run`.
func startBenchLisa(ctx context.Context, work string, hs benchTarget, llmURL string, rooms []string, maxConcurrent int, logOut io.Writer) (*benchLisa, error) {
	return startBenchLisaWith(ctx, work, hs, llmURL, rooms, maxConcurrent, logOut, "")
}

// startBenchLisaWith is startBenchLisa with extra configuration text
// appended (more keys of [context], say).
func startBenchLisaWith(ctx context.Context, work string, hs benchTarget, llmURL string, rooms []string, maxConcurrent int, logOut io.Writer, extra string) (*benchLisa, error) {
	return startBenchLisaLLM(ctx, work, hs, llmURL, rooms, maxConcurrent, logOut, "", extra)
}

// startBenchLisaLLM is startBenchLisaWith with more keys of [llm]
// (llmExtra, one "key = value" a line) as well.
func startBenchLisaLLM(ctx context.Context, work string, hs benchTarget, llmURL string, rooms []string, maxConcurrent int, logOut io.Writer, llmExtra, extra string) (*benchLisa, error) {
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(work, "persona.md"), []byte("You are Lisa, a concise helper.\n"), 0o600); err != nil {
		return nil, err
	}
	quoted := make([]string, len(rooms))
	for i, r := range rooms {
		quoted[i] = fmt.Sprintf("%q", r)
	}
	cfgText := fmt.Sprintf(`[matrix]
homeserver_url = %q
user_id = %q
device_id = %q
access_token = "env:LISA_BENCH_MATRIX_TOKEN"
allowed_room_ids = [%s]
mention_aliases = ["Lisa"]

[llm]
base_url = %q
api_key = ""
model = "bench-model"
%s
[persona]
path = "persona.md"
generic_error = "Something went wrong."
overload_error = "Too much at once."

[runtime]
data_dir = "data"
log_level = "warn"
max_concurrent_rooms = %d
# One human sends every mention of the bench, hundreds per room: the
# per-sender flood guard would refuse them.
sender_rate_limit = 0
`, hs.url, hs.user, hs.device, strings.Join(quoted, ", "), llmURL, llmExtra, maxConcurrent) + extra
	cfgPath := filepath.Join(work, "lisa.toml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		return nil, err
	}
	res, err := config.LoadAndResolve(cfgPath, func(k string) (string, bool) {
		if k == "LISA_BENCH_MATRIX_TOKEN" {
			return hs.token, true
		}
		return "", false
	})
	if err != nil {
		return nil, fmt.Errorf("bench configuration: %w", err)
	}
	log := logging.New(logOut, res.Config.Runtime.SlogLevel(), res.Secrets())
	clock := newSendClock(daemon.MatrixTransport(res.Config.Runtime)) // the pool `lisa run` uses
	session, err := matrix.Connect(ctx, hs.url, hs.user, hs.device, res.MatrixAccessToken.Reveal(), &http.Client{Timeout: daemon.MatrixClientTimeout, Transport: clock})
	if err != nil {
		return nil, err
	}
	d, err := daemon.Start(res, log, daemon.Deps{Session: session, Invoker: daemon.ProductionInvoker(res, log)(session)})
	if err != nil {
		return nil, err
	}
	return &benchLisa{d: d, session: session, sends: clock}, nil
}

// stop stops the daemon within a bounded time.
func (l *benchLisa) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = l.d.Stop(ctx)
}

// awaitSynced waits until Lisa's committed cursor has seen eventID as the
// last event of room: the response that carried it is fully processed.
func (l *benchLisa) awaitSynced(ctx context.Context, room, eventID string) error {
	for {
		cur, err := l.d.Store().Cursor()
		if err != nil {
			return err
		}
		if cur.GetLastEventIds()[room] == eventID {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Microsecond):
		}
	}
}

// awaitRooms waits until every room's actor answers a status request:
// its journal is replayed and it is live.
func (l *benchLisa) awaitRooms(ctx context.Context, rooms []string) error {
	pending := rooms
	for len(pending) > 0 {
		type result struct {
			room string
			ok   bool
		}
		results := make(chan result, len(pending))
		sem := make(chan struct{}, 256)
		for _, room := range pending {
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				res, err := l.d.System().Root.RequestFuture(l.d.System().RoomPID(room), &messages.RoomStatusRequest{}, 5*time.Second).Result()
				_, ok := res.(*messages.RoomStatus)
				results <- result{room, err == nil && ok}
			}()
		}
		var again []string
		for range pending {
			if r := <-results; !r.ok {
				again = append(again, r.room)
			}
		}
		pending = again
		if len(pending) > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// mention is the content of a message that mentions Lisa.
func mention(user string, n int) map[string]any {
	return map[string]any{
		"msgtype": "m.text", "body": fmt.Sprintf("Lisa, ping %d", n),
		"m.mentions": map[string]any{"user_ids": []string{user}},
	}
}

// discardLogger is for bench helpers that need a logger.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
