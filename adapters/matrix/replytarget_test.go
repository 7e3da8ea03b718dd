package matrix

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/testkit/fakehs"
)

// manualClock is a clock that moves only when told.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// replyRig is a fake homeserver with one allowed room, a message of Lisa's
// in it, and a sync source past its baseline.
type replyRig struct {
	hs    *fakehs.Server
	src   *Source
	clock *manualClock
	base  *roompb.SyncCursor
	lisa  string // the event ID of Lisa's message
}

const (
	rigBot, rigDevice, rigToken = "@lisa:fake.test", "LISA", "fake-token"
	rigHuman                    = "@ann:fake.test"
	rigRoom                     = "!a:fake.test"
)

func newReplyRig(ctx context.Context, t *testing.T) *replyRig {
	t.Helper()
	hs := fakehs.New(fakehs.Options{UserID: rigBot, DeviceID: rigDevice, Token: rigToken})
	if err := hs.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hs.Close)
	hs.CreateRoom(rigRoom, map[string]string{rigHuman: "Ann"})
	cli, err := Connect(ctx, hs.URL(), rigBot, rigDevice, rigToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	lisa, err := cli.SendReply(ctx, rigRoom, "lisa_txn_1", []byte(`{"msgtype":"m.text","body":"I am Lisa"}`))
	if err != nil {
		t.Fatal(err)
	}
	clock := &manualClock{t: time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)}
	src := NewSource(cli, SyncOptions{Timeout: 100 * time.Millisecond, TimelineLimit: 50, GapPageLimit: 5,
		Aliases: []string{"Lisa"}, AllowedRooms: []string{rigRoom}, ReadRetryDelay: time.Millisecond},
		&emptyLedger{}, slog.New(slog.DiscardHandler), clock.Now)
	base, err := src.Next(ctx, &roompb.SyncCursor{})
	if err != nil {
		t.Fatal(err)
	}
	return &replyRig{hs: hs, src: src, clock: clock, base: base.Cursor, lisa: lisa}
}

// post stores a message from the human and returns its event ID.
func (r *replyRig) post(t *testing.T, content map[string]any) string {
	t.Helper()
	ev, _, err := r.hs.Post(rigRoom, rigHuman, content)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// replyTo is the content of a reply to target.
func replyTo(target, body string) map[string]any {
	m := text(body)
	m["m.relates_to"] = map[string]any{"m.in_reply_to": map[string]any{"event_id": target}}
	return m
}

// eventIDFor is a well-formed event ID of a version 4+ room: "$" and 43
// URL-safe base64 characters.
func eventIDFor(seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return "$" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// candidates lists a batch's candidates as "event ID/trigger".
func candidates(b *messages.SyncBatch) []string {
	var out []string
	for _, c := range b.Candidates {
		out = append(out, c.GetEventId()+"/"+c.GetTrigger())
	}
	return out
}

const proxy414 = "<html><head><title>414 Request-URI Too Large</title></head><body><center><h1>414 Request-URI Too Large</h1></center></body></html>"

// TestPoisonReplyTargetsDoNotStallSync (issue #15): a message replying to
// an event ID the homeserver answers with a permanent error, or to
// something that is no event ID at all, used to fail every /sync answer:
// the cursor never moved and every room went silent. Now such a message is
// not a reply to Lisa: an invalid target is never looked up, a permanent
// refusal is asked once; the answer completes, its cursor moves on, and a
// reply to Lisa and a mention later in the same answer are accepted.
func TestPoisonReplyTargetsDoNotStallSync(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newReplyRig(ctx, t)
	invalidParam := `{"errcode":"M_INVALID_PARAM","error":"Event ID is invalid"}`
	// Targets that are no event IDs, each answered as a homeserver or its
	// proxy would if asked.
	invalid := []struct {
		name, target string
		status       int
		body         string
	}{
		{"a 60 KB ID", "$" + strings.Repeat("A", 60<<10), 414, proxy414},
		{"not an ID", "not-an-id", 400, invalidParam},
		{"256 bytes", "$" + strings.Repeat("b", 255), 414, proxy414},
		{"a newline", "$abc\ndef", 400, invalidParam},
		{"a space", "$abc def:hs", 400, invalidParam},
		{"non-ASCII", "$élan:hs", 400, invalidParam},
		{"a dollar alone", "$", 400, invalidParam},
	}
	// Well-formed targets the homeserver refuses for good.
	refused := []struct {
		name   string
		status int
		body   string
	}{
		{"400 M_INVALID_PARAM", 400, invalidParam},
		{"414 from a proxy", 414, proxy414},
		{"413 M_TOO_LARGE", 413, `{"errcode":"M_TOO_LARGE","error":"too large"}`},
		{"405 M_UNRECOGNIZED", 405, `{"errcode":"M_UNRECOGNIZED","error":"Unrecognized request"}`},
		{"404 M_UNRECOGNIZED", 404, `{"errcode":"M_UNRECOGNIZED","error":"Unrecognized request"}`},
		{"400 without a body", 400, ""},
		{"410 from a proxy", 410, "<html>Gone</html>"},
	}
	for _, c := range invalid {
		r.hs.AnswerEvent(c.target, c.status, c.body, -1)
		r.post(t, replyTo(c.target, "re: "+c.name))
	}
	for _, c := range refused {
		target := eventIDFor(c.name)
		r.hs.AnswerEvent(target, c.status, c.body, -1)
		r.post(t, replyTo(target, "re: "+c.name))
	}
	reply := r.post(t, replyTo(r.lisa, "tell me more"))
	mention := r.post(t, text("Lisa, are you there?"))

	before := r.hs.Counts()["event"]
	b, err := r.src.Next(ctx, r.base)
	if err != nil {
		t.Fatalf("the answer failed: %v", err)
	}
	if b.Cursor.GetNextBatch() == r.base.GetNextBatch() || b.Cursor.GetLastEventIds()[rigRoom] != mention {
		t.Fatalf("cursor did not move on: %v (was %v)", b.Cursor, r.base)
	}
	if got, want := strings.Join(candidates(b), " "), reply+"/reply "+mention+"/alias"; got != want {
		t.Fatalf("candidates %s, want %s", got, want)
	}
	if got := b.Rejected[string(RejectReplyTargetInvalid)]; got != len(invalid) {
		t.Errorf("%d replies to invalid targets, want %d (rejections %v)", got, len(invalid), b.Rejected)
	}
	if got := b.Rejected[string(RejectReplyTargetRejected)]; got != len(refused) {
		t.Errorf("%d replies to refused targets, want %d (rejections %v)", got, len(refused), b.Rejected)
	}
	// Invalid targets are never looked up; a refusal is not asked again;
	// the reply to Lisa is looked up once.
	if got, want := r.hs.Counts()["event"]-before, len(refused)+1; got != want {
		t.Errorf("%d event lookups, want %d", got, want)
	}
	// Nothing comes back: the next answer holds only what is new.
	again := r.post(t, text("Lisa, still there?"))
	b2, err := r.src.Next(ctx, b.Cursor)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(candidates(b2), " "); got != again+"/alias" {
		t.Fatalf("next answer: candidates %s, want only the new mention", got)
	}
}

// TestReplyLookupTransientFailures: a lookup the homeserver fails for now
// (5xx, 429, 408) is repeated in place; if it keeps failing, the whole
// answer fails with a transient error so that the reply is not lost, and
// it is accepted once the homeserver answers again. 401 is about Lisa's
// token, not the event: it fails the answer too.
func TestReplyLookupTransientFailures(t *testing.T) {
	for _, c := range []struct {
		name     string
		status   int
		body     string
		times    int // scripted answers; -1 for all
		ok       bool
		requests int
	}{
		{"503 twice, then the event", 503, `{"errcode":"M_UNKNOWN","error":"restarting"}`, 2, true, 3},
		{"429, then the event", 429, `{"errcode":"M_LIMIT_EXCEEDED","error":"slow down","retry_after_ms":1}`, 1, true, 2},
		{"408 from a proxy, then the event", 408, "<html>Request Timeout</html>", 1, true, 2},
		{"500 every time", 500, `{"errcode":"M_UNKNOWN","error":"internal error"}`, -1, false, readAttempts},
		{"502 every time", 502, "<html>Bad Gateway</html>", -1, false, readAttempts},
		{"408 every time", 408, "<html>Request Timeout</html>", -1, false, readAttempts},
		{"401 every time", 401, `{"errcode":"M_UNKNOWN_TOKEN","error":"token revoked"}`, -1, false, readAttempts},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r := newReplyRig(ctx, t)
			r.hs.AnswerEvent(r.lisa, c.status, c.body, c.times)
			reply := r.post(t, replyTo(r.lisa, "tell me more"))
			mention := r.post(t, text("Lisa, are you there?"))
			want := reply + "/reply " + mention + "/alias"
			before := r.hs.Counts()["event"]
			b, err := r.src.Next(ctx, r.base)
			if got := r.hs.Counts()["event"] - before; got != c.requests {
				t.Errorf("%d event lookups, want %d", got, c.requests)
			}
			if c.ok {
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.Join(candidates(b), " "); got != want {
					t.Fatalf("candidates %s, want %s", got, want)
				}
				return
			}
			var le *messages.Error
			if !errors.As(err, &le) || le.Permanent {
				t.Fatalf("want a transient failure of the answer, got %v", err)
			}
			// The homeserver recovers: the same answer, read again,
			// loses nothing.
			r.hs.AnswerEvent(r.lisa, 0, "", 0)
			b, err = r.src.Next(ctx, r.base)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(candidates(b), " "); got != want {
				t.Fatalf("after recovery: candidates %s, want %s", got, want)
			}
		})
	}
}

// TestStuckReplyLookupIsAbandoned: a reply whose target the homeserver
// fails every time (a 500 on that one ID) fails answers for a while, but
// not forever: once its lookup has failed in replyLookupStallAnswers
// answers over replyLookupStallTime, the next failure gives it up and the
// answer completes, with the mention after it. An event given up stays
// given up while a later one in the same answer takes its turn.
func TestStuckReplyLookupIsAbandoned(t *testing.T) {
	for _, c := range []struct {
		name    string
		stuck   int // replies whose lookups always fail
		advance func(answer int) time.Duration
		fails   int
	}{
		{"the clock runs: the count bounds", 1, func(int) time.Duration { return time.Hour }, replyLookupStallAnswers},
		{"quick retries: the time bounds", 1, func(answer int) time.Duration {
			if answer <= 8 {
				return 0
			}
			return replyLookupStallTime
		}, 8},
		{"two stuck replies, one after the other", 2, func(int) time.Duration { return time.Hour }, 2 * replyLookupStallAnswers},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r := newReplyRig(ctx, t)
			for i := range c.stuck {
				target := eventIDFor("stuck " + string(rune('a'+i)))
				r.hs.AnswerEvent(target, 500, `{"errcode":"M_UNKNOWN","error":"internal error"}`, -1)
				r.post(t, replyTo(target, "re: a broken event"))
			}
			mention := r.post(t, text("Lisa, are you there?"))
			fails := 0
			var b *messages.SyncBatch
			for answer := 1; ; answer++ {
				if answer > 30 {
					t.Fatal("the stuck lookups were never given up")
				}
				r.clock.Advance(c.advance(answer))
				var err error
				if b, err = r.src.Next(ctx, r.base); err == nil {
					break
				}
				var le *messages.Error
				if !errors.As(err, &le) || le.Permanent {
					t.Fatalf("answer %d: want a transient failure, got %v", answer, err)
				}
				fails++
			}
			if fails != c.fails {
				t.Errorf("%d answers failed, want %d", fails, c.fails)
			}
			if got := strings.Join(candidates(b), " "); got != mention+"/alias" {
				t.Fatalf("candidates %s, want the mention", got)
			}
			if got := b.Rejected[string(RejectReplyLookupAbandoned)]; got != c.stuck {
				t.Fatalf("%d lookups given up, want %d (rejections %v)", got, c.stuck, b.Rejected)
			}
			// A complete answer forgets the stalls: a new stuck reply
			// fails answers again.
			target := eventIDFor("stuck later")
			r.hs.AnswerEvent(target, 500, `{"errcode":"M_UNKNOWN"}`, -1)
			r.post(t, replyTo(target, "re: another broken event"))
			r.clock.Advance(time.Hour)
			if _, err := r.src.Next(ctx, b.Cursor); err == nil {
				t.Fatal("a new stuck lookup was given up at once")
			}
		})
	}
}
