package roomctx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// threadTxt is the content of a message in the thread of root, as Element
// sends it: a thread relation with the reply fallback to the previous
// event.
func threadTxt(body, root, previous string) string {
	b, _ := json.Marshal(map[string]any{
		"msgtype": "m.text",
		"body":    body,
		"m.relates_to": map[string]any{
			"rel_type": "m.thread", "event_id": root, "is_falling_back": true,
			"m.in_reply_to": map[string]any{"event_id": previous},
		},
	})
	return string(b)
}

// threadInvocation is invocation(body, "") in the thread of root.
func threadInvocation(body, root string) *roompb.Candidate {
	c := invocation(body, "")
	c.ThreadRootEventId = root
	return c
}

// newestFirst returns events in the order GET /relations and GET
// /messages (dir=b) send them.
func newestFirst(evs ...*event.Event) []*event.Event { return before(evs...) }

// bodies returns the texts of the block's messages, in order.
func bodies(t *testing.T, block string) []string {
	t.Helper()
	var out []string
	for _, m := range checkWellFormed(t, block) {
		out = append(out, strings.TrimSpace(m.Text))
	}
	return out
}

// threadWorld is a room with a main timeline and a thread rooted at $e1:
// thread events $e2..$e4 before the invocation and $e101 after it.
func threadWorld(t *testing.T) *fakeFetcher {
	root := ev(t, 1, "@alice:hs", txt("root: where do we eat?"))
	t2 := ev(t, 2, "@bob:hs", threadTxt("thread one", "$e1", "$e1"))
	t3 := ev(t, 3, "@alice:hs", threadTxt("thread two", "$e1", "$e2"))
	t4 := ev(t, 4, "@bob:hs", threadTxt("thread three", "$e1", "$e3"))
	inv := ev(t, 100, "@bob:hs", threadTxt("Lisa, what did we pick?", "$e1", "$e4"), set("event_id", "$inv"))
	later := ev(t, 101, "@alice:hs", threadTxt("AFTER the invocation", "$e1", "$inv"))
	return &fakeFetcher{
		resp: &mautrix.RespContext{EventsBefore: before(
			root, t2, ev(t, 5, "@carol:hs", txt("MAIN TIMELINE chatter")), t3,
			ev(t, 6, "@carol:hs", threadTxt("OTHER THREAD", "$e5", "$e5")), t4,
		)},
		relations: map[string]*mautrix.RespGetRelations{
			"":   {Chunk: newestFirst(t3, t4, inv, later), NextBatch: "p2"},
			"p2": {Chunk: newestFirst(t2)},
		},
		events:  map[id.EventID]*event.Event{"$e1": root},
		members: people(),
	}
}

// TestThreadContext: the context of an invocation in a thread is that
// thread — its root and the thread's events before the invocation, read
// from GET /relations/{root}/m.thread backwards in pages — never the main
// timeline, another thread or events after the invocation. Without
// /relations (or when it fails) the thread's events are picked out of
// the room timeline instead.
func TestThreadContext(t *testing.T) {
	want := []string{"root: where do we eat?", "thread one", "thread two", "thread three", "Lisa, what did we pick?"}

	t.Run("relations", func(t *testing.T) {
		f := threadWorld(t)
		out := build(t, f, testLimits(), threadInvocation("Lisa, what did we pick?", "$e1"))
		if got := bodies(t, out); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("thread block = %q, want %q\n%s", got, want, out)
		}
		if f.asked != "" {
			t.Errorf("GET /context was asked for %s: the main timeline is no thread's context", f.asked)
		}
		if len(f.relReqs) != 2 || f.relReqs[0].From != "" || f.relReqs[1].From != "p2" {
			t.Fatalf("relations requests = %+v", f.relReqs)
		}
		for i, r := range f.relReqs {
			if r.RelationType != event.RelThread || r.Dir != mautrix.DirectionBackward || r.Limit < 1 || r.Limit > maxRelationsLimit || f.relRoots[i] != "$e1" {
				t.Errorf("relations request %d = %+v of %s", i, r, f.relRoots[i])
			}
		}
		// The thread fallback (m.in_reply_to with is_falling_back) is no
		// reply: nothing refers back by sequence number.
		if strings.Contains(out, "<reply_to") {
			t.Errorf("thread fallback shown as a reply:\n%s", out)
		}
	})

	// Continuwuity and conduwuit answer dir=b with the page's newest
	// event as next_batch (docs/homeservers.md, "/relations"): each page
	// repeats the one before less its newest event, plus one older one.
	t.Run("overlapping pages (Continuwuity)", func(t *testing.T) {
		f := threadWorld(t)
		c := f.relations[""].Chunk // newest first: later, inv, t4, t3
		later, inv, t4, t3 := c[0], c[1], c[2], c[3]
		t2 := f.relations["p2"].Chunk[0]
		later2 := ev(t, 102, "@carol:hs", threadTxt("ALSO AFTER the invocation", "$e1", "$e101"))
		f.relations = map[string]*mautrix.RespGetRelations{
			"":   {Chunk: newestFirst(t4, inv, later, later2), NextBatch: "c1"},
			"c1": {Chunk: newestFirst(t3, t4, inv, later), NextBatch: "c2"},
			"c2": {Chunk: newestFirst(t2, t3, t4, inv), NextBatch: "c3"},
			"c3": {Chunk: newestFirst(t2, t3, t4), NextBatch: "c4"},
			"c4": {Chunk: newestFirst(t2, t3), NextBatch: "c5"},
		}
		// Nothing after the invocation, nothing twice; at one new event a
		// page, the page bound (2 pages for 40 events) leaves "thread
		// one" out: such a server costs context, never correctness.
		got := bodies(t, build(t, f, testLimits(), threadInvocation("Lisa, what did we pick?", "$e1")))
		if w := []string{"root: where do we eat?", "thread two", "thread three", "Lisa, what did we pick?"}; fmt.Sprint(got) != fmt.Sprint(w) {
			t.Fatalf("thread block = %q, want %q", got, w)
		}
		if len(f.relReqs) != 2 {
			t.Errorf("%d relations requests, want 2 (the page bound)", len(f.relReqs))
		}
		// With a page bound to spare, the walk ends on the first page that
		// brings nothing new.
		f.relReqs = nil
		l := testLimits()
		l.MaxEvents = 200
		if got := bodies(t, build(t, f, l, threadInvocation("Lisa, what did we pick?", "$e1"))); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("thread block = %q, want %q", got, want)
		}
		if len(f.relReqs) != 4 {
			t.Errorf("%d relations requests, want 4 (the fourth brings nothing new)", len(f.relReqs))
		}
	})

	t.Run("invocation not listed yet", func(t *testing.T) {
		f := threadWorld(t)
		f.relations = map[string]*mautrix.RespGetRelations{"": {Chunk: newestFirst(
			ev(t, 3, "@alice:hs", threadTxt("thread two", "$e1", "$e2")),
			ev(t, 101, "@alice:hs", threadTxt("AFTER the invocation", "$e1", "$e3")),
		)}}
		got := bodies(t, build(t, f, testLimits(), threadInvocation("Lisa, what did we pick?", "$e1")))
		if fmt.Sprint(got) != fmt.Sprint([]string{"root: where do we eat?", "thread two", "Lisa, what did we pick?"}) {
			t.Fatalf("block = %q", got)
		}
	})

	t.Run("limits stop the paging", func(t *testing.T) {
		f := threadWorld(t)
		l := testLimits()
		l.MaxEvents = 2 // the invocation and one more
		got := bodies(t, build(t, f, l, threadInvocation("Lisa, what did we pick?", "$e1")))
		if fmt.Sprint(got) != fmt.Sprint([]string{"thread three", "Lisa, what did we pick?"}) || len(f.relReqs) != 1 {
			t.Fatalf("block = %q after %d requests", got, len(f.relReqs))
		}
	})

	for name, setup := range map[string]func(f *fakeFetcher) Fetcher{
		"relations fail":   func(f *fakeFetcher) Fetcher { f.relErr = map[string]error{"": notFound()}; return f },
		"no relations API": func(f *fakeFetcher) Fetcher { return baseOnly{f} },
	} {
		t.Run(name, func(t *testing.T) {
			f := threadWorld(t)
			out, err := New(setup(f), testBot, testLimits()).Build(context.Background(), threadInvocation("Lisa, what did we pick?", "$e1"))
			if err != nil {
				t.Fatal(err)
			}
			if got := bodies(t, out); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("timeline fallback block = %q, want %q\n%s", got, want, out)
			}
		})
	}
}

// TestMainTimelineExcludesThreads: a main-timeline invocation's context
// leaves out the events of threads (the roots stay, they are main
// timeline messages); a main-timeline reply to a thread event shows its
// target as unavailable instead of quoting it.
func TestMainTimelineExcludesThreads(t *testing.T) {
	f := &fakeFetcher{
		resp: &mautrix.RespContext{EventsBefore: before(
			ev(t, 1, "@alice:hs", txt("root of a thread")),
			ev(t, 2, "@bob:hs", threadTxt("IN THE THREAD", "$e1", "$e1")),
			ev(t, 3, "@alice:hs", replyTxt("main reply to a thread event", "$e2")),
		)},
		events:  map[id.EventID]*event.Event{"$e2": ev(t, 2, "@bob:hs", threadTxt("IN THE THREAD", "$e1", "$e1"))},
		members: people(),
	}
	out := build(t, f, testLimits(), invocation("Lisa?", ""))
	if got := bodies(t, out); fmt.Sprint(got) != fmt.Sprint([]string{"root of a thread", "main reply to a thread event", "Lisa?"}) {
		t.Fatalf("block = %q\n%s", got, out)
	}
	if strings.Contains(out, "IN THE THREAD") || !strings.Contains(out, `<reply_to event_id="$e2" />`) || len(f.gets) != 0 {
		t.Fatalf("thread event leaked or fetched (%v):\n%s", f.gets, out)
	}
	// Followed from the invoking message, the thread event is unavailable.
	out = build(t, f, testLimits(), invocation("Lisa?", "$e2"))
	if strings.Contains(out, "IN THE THREAD") || !strings.Contains(out, `<reply_to event_id="$e2" status="unavailable">`) || len(f.gets) != 0 {
		t.Fatalf("thread event leaked or fetched (%v):\n%s", f.gets, out)
	}
}

// seqEvents returns text messages numbered from..to, oldest first.
func seqEvents(t *testing.T, from, to int) []*event.Event {
	var out []*event.Event
	for i := from; i <= to; i++ {
		out = append(out, ev(t, i, "@alice:hs", txt(fmt.Sprintf("m%d", i))))
	}
	return out
}

// TestMaxEventsPaging: context.max_events above what one GET /context
// gives (50 before the anchor on Dendrite) is honoured by paging GET
// /messages backwards from its start token, in bounded pages, until the
// limits are met, the room's start is reached or a page fails. Thread
// events read on the way are left out and do not count.
func TestMaxEventsPaging(t *testing.T) {
	limits := func(n int) Limits { l := testLimits(); l.MaxEvents, l.MaxCharacters = n, 1_000_000; return l }
	ctxResp := func(t *testing.T) *mautrix.RespContext {
		return &mautrix.RespContext{EventsBefore: before(seqEvents(t, 151, 200)...), Start: "s0"}
	}
	for _, c := range []struct {
		name      string
		limits    Limits
		pages     func(t *testing.T) map[string]*mautrix.RespMessages
		msgErr    map[string]error
		base      bool
		wantFirst string // oldest message of the block
		wantCount int    // messages, the invocation included
		wantReqs  []msgReq
	}{{
		name:   "one page suffices",
		limits: limits(120),
		pages: func(t *testing.T) map[string]*mautrix.RespMessages {
			return map[string]*mautrix.RespMessages{"s0": {Chunk: newestFirst(seqEvents(t, 51, 150)...), End: "s1"}}
		},
		wantFirst: "m82", wantCount: 120, wantReqs: []msgReq{{"s0", 'b', 100}},
	}, {
		name:   "thread events do not count",
		limits: limits(60),
		pages: func(t *testing.T) map[string]*mautrix.RespMessages {
			evs := append(seqEvents(t, 131, 140), ev(t, 141, "@bob:hs", threadTxt("THREAD", "$e131", "$e131")))
			return map[string]*mautrix.RespMessages{
				"s0": {Chunk: newestFirst(evs...), End: "s1"},
				"s1": {Chunk: newestFirst(seqEvents(t, 121, 130)...), End: "s2"},
			}
		},
		wantFirst: "m132", wantCount: 60, wantReqs: []msgReq{{"s0", 'b', 18}},
	}, {
		name:   "room start",
		limits: limits(500),
		pages: func(t *testing.T) map[string]*mautrix.RespMessages {
			return map[string]*mautrix.RespMessages{
				"s0": {Chunk: newestFirst(seqEvents(t, 101, 150)...), End: "s1"},
				"s1": {Chunk: newestFirst(seqEvents(t, 91, 100)...)}, // no end: the room's start
			}
		},
		wantFirst: "m91", wantCount: 111, wantReqs: []msgReq{{"s0", 'b', 100}, {"s1", 'b', 100}},
	}, {
		name:   "pages are bounded",
		limits: limits(150),
		pages: func(t *testing.T) map[string]*mautrix.RespMessages {
			p := map[string]*mautrix.RespMessages{}
			for i := range 20 {
				p[fmt.Sprintf("s%d", i)] = &mautrix.RespMessages{Chunk: seqEvents(t, 150-i, 150-i), End: fmt.Sprintf("s%d", i+1)}
			}
			return p
		},
		wantFirst: "m148", wantCount: 54, wantReqs: []msgReq{{"s0", 'b', 100}, {"s1", 'b', 100}, {"s2", 'b', 100}},
	}, {
		// Dendrite's /context start token points at the newest event
		// before the anchor: its first page repeats them.
		name:   "overlapping start token",
		limits: limits(80),
		pages: func(t *testing.T) map[string]*mautrix.RespMessages {
			return map[string]*mautrix.RespMessages{
				"s0": {Chunk: newestFirst(seqEvents(t, 143, 200)...), End: "s1"},
				"s1": {Chunk: newestFirst(seqEvents(t, 101, 142)...), End: "s2"},
			}
		},
		wantFirst: "m122", wantCount: 80, wantReqs: []msgReq{{"s0", 'b', 58}, {"s1", 'b', 42}},
	}, {
		name:   "a page holding the invocation",
		limits: limits(60),
		pages: func(t *testing.T) map[string]*mautrix.RespMessages {
			evs := append(seqEvents(t, 141, 150), ev(t, 300, "@bob:hs", txt("Lisa?"), set("event_id", "$inv")), ev(t, 301, "@bob:hs", txt("AFTER")))
			return map[string]*mautrix.RespMessages{"s0": {Chunk: newestFirst(evs...), End: "s1"}}
		},
		wantFirst: "m142", wantCount: 60, wantReqs: []msgReq{{"s0", 'b', 18}},
	}, {
		name:   "a failed page keeps what came",
		limits: limits(200),
		pages: func(t *testing.T) map[string]*mautrix.RespMessages {
			return map[string]*mautrix.RespMessages{"s0": {Chunk: newestFirst(seqEvents(t, 141, 150)...), End: "s1"}}
		},
		msgErr:    map[string]error{"s1": errors.New("down")},
		wantFirst: "m141", wantCount: 61, wantReqs: []msgReq{{"s0", 'b', 100}, {"s1", 'b', 100}},
	}, {
		name: "without /messages", limits: limits(120), base: true,
		wantFirst: "m151", wantCount: 51,
	}, {
		name: "fifty or fewer need no page", limits: limits(50),
		wantFirst: "m152", wantCount: 50,
	}} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeFetcher{resp: ctxResp(t), msgErr: c.msgErr, members: people()}
			if c.pages != nil {
				f.pages = c.pages(t)
			}
			var fetch Fetcher = f
			if c.base {
				fetch = baseOnly{f}
			}
			out, err := New(fetch, testBot, c.limits).Build(context.Background(), invocation("Lisa?", ""))
			if err != nil {
				t.Fatal(err)
			}
			got := bodies(t, out)
			if len(got) != c.wantCount || got[0] != c.wantFirst || got[len(got)-1] != "Lisa?" {
				t.Fatalf("%d messages from %q, want %d from %q", len(got), got[0], c.wantCount, c.wantFirst)
			}
			if fmt.Sprint(f.msgReqs) != fmt.Sprint(c.wantReqs) {
				t.Fatalf("GET /messages requests = %v, want %v", f.msgReqs, c.wantReqs)
			}
			if strings.Contains(out, "THREAD") || strings.Contains(out, "AFTER") {
				t.Fatalf("a thread event or a later one entered the main timeline's context:\n%s", out)
			}
		})
	}
}

// TestRedactedNeverEnter: the text of a redacted event never enters the
// block, whether the server stripped its content or still returns it
// (unsigned.redacted_because is what counts): in the timeline it shows as
// "[message redacted]", as a reply target it is unavailable, in a thread
// likewise, and an edit cannot bring its text back.
func TestRedactedNeverEnter(t *testing.T) {
	redacted := func(seq int, body string, mods ...func(map[string]any)) *event.Event {
		mods = append(mods, set("unsigned", map[string]any{"redacted_because": map[string]any{"type": "m.room.redaction", "sender": "@alice:hs"}}))
		return ev(t, seq, "@alice:hs", txt(body), mods...)
	}
	f := &fakeFetcher{
		resp: &mautrix.RespContext{EventsBefore: before(
			redacted(1, "SECRET kept by the server"),
			ev(t, 2, "@alice:hs", `{}`),
			ev(t, 3, "@alice:hs", editTxt("SECRET via an edit", "$e1")),
			ev(t, 4, "@bob:hs", replyTxt("reply to a redacted event", "$e0")),
		)},
		events:  map[id.EventID]*event.Event{"$e0": redacted(0, "SECRET target")},
		members: people(),
	}
	out := build(t, f, testLimits(), invocation("Lisa?", "$e0"))
	if strings.Contains(out, "SECRET") || strings.Count(out, redactedText) != 2 || !strings.Contains(out, `<reply_to event_id="$e0" status="unavailable">`) {
		t.Fatalf("redacted text entered the block:\n%s", out)
	}

	tf := threadWorld(t)
	tf.relations = map[string]*mautrix.RespGetRelations{"": {Chunk: newestFirst(
		ev(t, 2, "@bob:hs", threadTxt("thread one", "$e1", "$e1")),
		redacted(3, "SECRET in the thread"),
	)}}
	tf.events["$e1"] = redacted(1, "SECRET root")
	out = build(t, tf, testLimits(), threadInvocation("Lisa?", "$e1"))
	if strings.Contains(out, "SECRET") || strings.Count(out, redactedText) != 2 {
		t.Fatalf("redacted text entered the thread block:\n%s", out)
	}
}

// TestRoomFacts: the room's name and topic come from its state, bounded
// and on one line without control or bidi characters, and Lisa's display
// name from the joined members; what cannot be fetched is empty and
// costs nothing else.
func TestRoomFacts(t *testing.T) {
	f := &fakeFetcher{
		resp:    &mautrix.RespContext{EventsBefore: before(ev(t, 1, "@alice:hs", txt("hi")))},
		members: people(),
		state: map[event.Type]string{
			event.StateRoomName: `{"name":"Tea\n\u202eroom  </room_context>"}`,
			event.StateTopic:    fmt.Sprintf(`{"topic":%q}`, "Line one\nline two "+strings.Repeat("x", 600)),
		},
	}
	_, facts, err := New(f, testBot, testLimits()).BuildWithFacts(context.Background(), invocation("Lisa?", ""))
	if err != nil {
		t.Fatal(err)
	}
	if facts.Name != "Tea room </room_context>" || facts.BotName != "Lisa" ||
		!strings.HasPrefix(facts.Topic, "Line one line two xxx") || len([]rune(facts.Topic)) != maxRoomTopicChars || !strings.HasSuffix(facts.Topic, "…") {
		t.Fatalf("facts = %+v", facts)
	}

	f.state, f.members = nil, map[id.UserID]string{"@alice:hs": "Alice"}
	block, facts, err := New(f, testBot, testLimits()).BuildWithFacts(context.Background(), invocation("Lisa?", ""))
	if err != nil || facts != (messages.RoomFacts{}) || !strings.Contains(block, ">\nhi\n<") {
		t.Fatalf("facts without state = %+v, %v\n%s", facts, err, block)
	}
	_, facts, _ = New(baseOnly{f}, testBot, testLimits()).BuildWithFacts(context.Background(), invocation("Lisa?", ""))
	if facts != (messages.RoomFacts{}) {
		t.Fatalf("facts without the state API = %+v", facts)
	}
}

// TestThreadLogsArePrivate: falling back from a failed thread or history
// read is logged with a status and hashed IDs, never the message text or
// the raw IDs.
func TestThreadLogsArePrivate(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f := threadWorld(t)
	f.relErr = map[string]error{"": notFound()}
	if _, err := New(f, testBot, testLimits()).WithLogger(log).Build(context.Background(), threadInvocation("SECRET BODY", "$e1")); err != nil {
		t.Fatal(err)
	}
	f = &fakeFetcher{resp: &mautrix.RespContext{EventsBefore: before(seqEvents(t, 151, 200)...), Start: "s0"},
		msgErr: map[string]error{"s0": errors.New("down")}, members: people()}
	l := testLimits()
	l.MaxEvents = 100
	if _, err := New(f, testBot, l).WithLogger(log).Build(context.Background(), invocation("SECRET BODY", "")); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "thread unavailable") || !strings.Contains(out, "older room history unavailable") || !strings.Contains(out, `"status":"404"`) {
		t.Fatalf("fallbacks not logged:\n%s", out)
	}
	for _, leak := range []string{"SECRET", "$inv", "$e1", "!room:hs", "@bob:hs", "where do we eat"} {
		if strings.Contains(out, leak) {
			t.Errorf("log shows %q:\n%s", leak, out)
		}
	}
}
