package roomctx

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages/roompb"
)

// TestUnusableReplyTargets: a reply target the invoking message names is
// followed, and each unusable kind (another room's, redacted, not text,
// an edit, an event whose ID does not match) is shown as unavailable
// without its text.
func TestUnusableReplyTargets(t *testing.T) {
	targets := map[string]*event.Event{
		"$e1": ev(t, 1, "@alice:hs", txt("OTHER ROOM"), set("room_id", string(otherRoom))),
		"$e2": ev(t, 2, "@alice:hs", txt("REDACTED"), set("unsigned", map[string]any{"redacted_because": map[string]any{}})),
		"$e3": ev(t, 3, "@alice:hs", `{"msgtype":"m.file","body":"FILE"}`),
		"$e4": ev(t, 4, "@alice:hs", editTxt("EDIT", "$e9")),
		"$e5": ev(t, 99, "@alice:hs", txt("WRONG ID")),
	}
	for target, evt := range targets {
		t.Run(target, func(t *testing.T) {
			f := &fakeFetcher{resp: &mautrix.RespContext{}, members: people(), events: map[id.EventID]*event.Event{id.EventID(target): evt}}
			out := build(t, f, testLimits(), invocation("Lisa?", target))
			if !strings.Contains(out, `<reply_to event_id="`+target+`" status="unavailable">`) {
				t.Errorf("target not unavailable:\n%s", out)
			}
			for _, leak := range []string{"OTHER ROOM", "REDACTED", "FILE", "EDIT", "WRONG ID"} {
				if strings.Contains(out, leak) {
					t.Errorf("%q entered the block:\n%s", leak, out)
				}
			}
		})
	}
}

// room is a fake room whose timeline grows: n text messages, each
// replying to one ten messages back (sometimes outside the block).
type room struct {
	t      *testing.T
	events []*event.Event
}

func (r *room) say(n int) {
	for range n {
		i := len(r.events) + 1
		content := txt(fmt.Sprintf("message %d", i))
		if i > 10 && i%3 == 0 {
			content = replyTxt(fmt.Sprintf("message %d", i), fmt.Sprintf("$e%d", i-10))
		}
		r.events = append(r.events, ev(r.t, i, "@alice:hs", content))
	}
}

// invoke builds the excerpt for a new invoking message after the room's
// events (GET /context gives at most 50 before it).
func (r *room) invoke(b *Builder) []string {
	r.t.Helper()
	evs := r.events[max(0, len(r.events)-50):]
	b.fetch = &fakeFetcher{resp: &mautrix.RespContext{EventsBefore: before(evs...)}, members: people()}
	c := &roompb.Candidate{RoomId: string(testRoom), EventId: fmt.Sprintf("$inv%d", len(r.events)), Sender: "@bob:hs",
		OriginTsMs: baseTS + int64(len(r.events)+1)*60_000, Trigger: "mention", Body: "Lisa?"}
	ex, _, err := b.BuildExcerpt(context.Background(), c)
	if err != nil {
		r.t.Fatal(err)
	}
	if !strings.HasPrefix(ex.Block(), "<room_context") || ex.Close != "</room_context>" {
		r.t.Fatalf("not a block: %q", ex.Block())
	}
	return ex.Events
}

// TestExcerptStartMovesInSteps: the block's start stays put while new
// messages arrive and then moves WindowStepEvents messages at once; each
// message renders byte-identically in every block it appears in, whatever
// the block's start (the invoking one aside, which is marked); and the
// events always stay within MaxEvents.
func TestExcerptStartMovesInSteps(t *testing.T) {
	const maxEvents, step = 20, 8
	b := New(&fakeFetcher{}, testBot, Limits{MaxEvents: maxEvents, MaxCharacters: 24000, MaxEventCharacters: 4000, MaxReplyDepth: 2, WindowStepEvents: step})
	r := &room{t: t}
	r.say(30)
	idOf := func(e string) string {
		rest := e[strings.Index(e, `event_id="`)+len(`event_id="`):]
		return rest[:strings.Index(rest, `"`)]
	}
	seen := map[string]string{} // every rendering so far, by event ID
	prevFirst, moves, compared := "", 0, 0
	for inv := range 25 {
		evs := r.invoke(b)
		if len(evs) > maxEvents || len(evs) < maxEvents-step+1 {
			t.Fatalf("invocation %d: %d events, want %d..%d", inv, len(evs), maxEvents-step+1, maxEvents)
		}
		if !strings.Contains(evs[len(evs)-1], `invocation="true"`) {
			t.Fatalf("the invoking message is not last: %q", evs[len(evs)-1])
		}
		first := idOf(evs[0])
		for _, e := range evs[:len(evs)-1] {
			if p, ok := seen[idOf(e)]; ok {
				compared++
				if p != e {
					t.Fatalf("invocation %d: an event renders differently from an earlier block:\n%s\n%s", inv, p, e)
				}
			}
			seen[idOf(e)] = e
		}
		if prevFirst != "" && first != prevFirst {
			moves++
		}
		prevFirst = first
		r.say(2) // a few messages between invocations
	}
	if compared < 100 {
		t.Fatalf("only %d renderings compared", compared)
	}
	// 25 invocations, 2 new messages each (plus the first): the start
	// moves about every step/2 invocations, never every time.
	if moves == 0 || moves > 25*2/step+1 {
		t.Fatalf("the start moved %d times in 25 invocations", moves)
	}
}

// TestExcerptStepOneKeepsTheFullestBlock: with a step of 1 (the default)
// the block is as full as the limits allow, as before steps existed.
func TestExcerptStepOneKeepsTheFullestBlock(t *testing.T) {
	b := New(&fakeFetcher{}, testBot, Limits{MaxEvents: 10, MaxCharacters: 24000, MaxEventCharacters: 4000, MaxReplyDepth: 2})
	r := &room{t: t}
	r.say(30)
	for range 5 {
		if evs := r.invoke(b); len(evs) != 10 {
			t.Fatalf("%d events, want 10", len(evs))
		}
		r.say(3)
	}
}
