package roomctx

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages/roompb"
)

func TestBuildFallback(t *testing.T) {
	target := func(t *testing.T) map[id.EventID]*event.Event {
		return map[id.EventID]*event.Event{"$e1": ev(t, 1, "@alice:hs", txt("the question"))}
	}
	for _, tc := range []struct {
		name string
		f    func(t *testing.T) *fakeFetcher
		c    *roompb.Candidate
		want string
	}{{
		name: "context fails",
		f: func(*testing.T) *fakeFetcher {
			return &fakeFetcher{ctxErr: notFound(), members: people()}
		},
		c: invocation("Lisa, help?", ""),
		want: `<room_context room_id="!room:hs">
<message event_id="$inv" author_id="@bob:hs" author_name="Bob" timestamp="2026-07-25T19:00:00Z" invocation="true">
Lisa, help?
</message>
</room_context>`,
	}, {
		name: "context and members fail",
		f: func(*testing.T) *fakeFetcher {
			return &fakeFetcher{ctxErr: errors.New("connection refused"), membersErr: errors.New("connection refused")}
		},
		c: invocation("Lisa, help?", ""),
		want: `<room_context room_id="!room:hs">
<message event_id="$inv" author_id="@bob:hs" author_name="@bob:hs" timestamp="2026-07-25T19:00:00Z" invocation="true">
Lisa, help?
</message>
</room_context>`,
	}, {
		name: "nil response",
		f:    func(*testing.T) *fakeFetcher { return &fakeFetcher{members: people()} },
		c:    invocation("Lisa, help?", ""),
		want: `<room_context room_id="!room:hs">
<message event_id="$inv" author_id="@bob:hs" author_name="Bob" timestamp="2026-07-25T19:00:00Z" invocation="true">
Lisa, help?
</message>
</room_context>`,
	}, {
		name: "empty response without slices",
		f: func(*testing.T) *fakeFetcher {
			return &fakeFetcher{resp: &mautrix.RespContext{}, members: people()}
		},
		c: invocation("Lisa, help?", ""),
		want: `<room_context room_id="!room:hs">
<message event_id="$inv" author_id="@bob:hs" author_name="Bob" timestamp="2026-07-25T19:00:00Z" invocation="true">
Lisa, help?
</message>
</room_context>`,
	}, {
		name: "context fails, reply target still quoted",
		f: func(t *testing.T) *fakeFetcher {
			return &fakeFetcher{ctxErr: notFound(), members: people(), events: target(t)}
		},
		c: invocation("Lisa, answer that", "$e1"),
		want: `<room_context room_id="!room:hs">
<message event_id="$inv" author_id="@bob:hs" author_name="Bob" timestamp="2026-07-25T19:00:00Z" invocation="true">
Lisa, answer that
<reply_to event_id="$e1" author_id="@alice:hs" author_name="Alice" timestamp="2026-07-25T17:21:00Z">
the question
</reply_to>
</message>
</room_context>`,
	}, {
		name: "no timestamp, html invocation",
		f:    func(*testing.T) *fakeFetcher { return &fakeFetcher{ctxErr: notFound(), members: people()} },
		c: &roompb.Candidate{RoomId: string(testRoom), EventId: "$inv", Sender: "@bob:hs",
			Body: "plain", FormattedBody: "<p>see <code>x &lt; y</code></p><script>steal()</script>"},
		want: `<room_context room_id="!room:hs">
<message event_id="$inv" author_id="@bob:hs" author_name="Bob" invocation="true">
see ` + "`x &lt; y`" + `
</message>
</room_context>`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := build(t, tc.f(t), testLimits(), tc.c); got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	b := New(&fakeFetcher{members: people()}, testBot, testLimits())
	for _, c := range []*roompb.Candidate{
		nil,
		{EventId: "$inv", Sender: "@bob:hs"},
		{RoomId: string(testRoom), Sender: "@bob:hs"},
		{RoomId: string(testRoom), EventId: "$inv"},
	} {
		if _, err := b.Build(context.Background(), c); err == nil {
			t.Errorf("candidate %v accepted", c)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Build(ctx, invocation("hi", "")); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled build: %v", err)
	}
}

func TestContextRequest(t *testing.T) {
	for _, tc := range []struct{ maxEvents, limit int }{{1, 2}, {40, 80}, {50, 100}, {500, 100}} {
		f := &fakeFetcher{members: people()}
		l := testLimits()
		l.MaxEvents = tc.maxEvents
		build(t, f, l, invocation("hi", ""))
		if f.limit != tc.limit || f.room != testRoom || f.asked != "$inv" {
			t.Errorf("MaxEvents %d: asked %s %s limit %d, want limit %d", tc.maxEvents, f.room, f.asked, f.limit, tc.limit)
		}
		if f.filter == nil || !slices.Equal(f.filter.Types, []event.Type{event.EventMessage}) || !f.filter.LazyLoadMembers {
			t.Errorf("filter %+v", f.filter)
		}
	}
}

func TestNewClamps(t *testing.T) {
	got := New(&fakeFetcher{}, testBot, Limits{MaxEvents: -1, MaxCharacters: 0, MaxEventCharacters: 9, MaxReplyDepth: -3}).Limits()
	want := Limits{MaxEvents: 1, MaxCharacters: 1, MaxEventCharacters: 1, MaxReplyDepth: 0, WindowStepEvents: 1}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	got = New(&fakeFetcher{}, testBot, Limits{MaxEvents: 5, MaxCharacters: 100, MaxEventCharacters: 500, MaxReplyDepth: 2}).Limits()
	if got.MaxEventCharacters != 100 {
		t.Fatalf("event cap above total cap: %+v", got)
	}
}

// TestBuildWindow covers what is kept from the fetched window and how.
func TestBuildWindow(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after func(t *testing.T) []*event.Event
		state         func(t *testing.T) []*event.Event
		noMembers     bool
		want, notWant []string
		// messages is the number of messages in the block, when checked.
		messages int
	}{{
		name: "other room, later events and duplicates are dropped",
		before: func(t *testing.T) []*event.Event {
			return before(
				ev(t, 1, "@alice:hs", txt("kept one")),
				ev(t, 2, "@alice:hs", txt("FOREIGN"), set("room_id", string(otherRoom))),
				ev(t, 1, "@alice:hs", txt("DUPLICATE")),
				ev(t, 3, "@alice:hs", txt("INVOCATION COPY"), set("event_id", "$inv")),
				ev(t, 4, "@alice:hs", txt("no room id is this room"), set("room_id", nil)),
			)
		},
		after: func(t *testing.T) []*event.Event {
			return []*event.Event{ev(t, 200, "@alice:hs", txt("LATER"))}
		},
		want:     []string{"kept one", "no room id is this room"},
		notWant:  []string{"FOREIGN", "DUPLICATE", "INVOCATION COPY", "LATER"},
		messages: 3,
	}, {
		name: "only text messages are turns",
		before: func(t *testing.T) []*event.Event {
			return before(
				ev(t, 1, "@alice:hs", `{"msgtype":"m.image","body":"IMAGE.png","url":"mxc://hs/x"}`),
				ev(t, 2, "@alice:hs", `{"m.relates_to":{"rel_type":"m.annotation","event_id":"$e1","key":"REACTION"}}`, set("type", "m.reaction")),
				ev(t, 3, "@alice:hs", `{"membership":"join","displayname":"MEMBER"}`, set("type", "m.room.member"), set("state_key", "@alice:hs")),
				ev(t, 4, "@alice:hs", txt("STATEFUL"), set("state_key", "")),
				ev(t, 5, "@alice:hs", txt("NO SENDER"), set("sender", "")),
				ev(t, 6, "@alice:hs", txt("NO TIME"), set("origin_server_ts", 0)),
				ev(t, 7, "@alice:hs", `{"msgtype":"m.text","body":42}`),
				ev(t, 8, "@alice:hs", `{"msgtype":"m.text","body":"   "}`),
				ev(t, 9, "@alice:hs", `{"msgtype":"m.notice","body":"a notice"}`),
				ev(t, 10, testBot, txt("said by Lisa")),
			)
		},
		want: []string{`msgtype="m.notice"`, "a notice",
			`author_id="@lisa:hs" author_name="Lisa" timestamp="2026-07-25T17:30:00Z" assistant="true">` + "\nsaid by Lisa"},
		notWant:  []string{"IMAGE", "REACTION", "MEMBER", "STATEFUL", "NO SENDER", "NO TIME", "42"},
		messages: 3,
	}, {
		name: "edits",
		before: func(t *testing.T) []*event.Event {
			return before(
				ev(t, 1, "@alice:hs", txt("original one")),
				ev(t, 2, "@alice:hs", editTxt("FIRST EDIT", "$e1")),
				ev(t, 3, "@bob:hs", editTxt("FOREIGN EDIT", "$e1")),
				ev(t, 4, "@alice:hs", editTxt("second edit", "$e1")),
				ev(t, 5, "@alice:hs", editTxt("ORPHAN EDIT", "$e0")),
				ev(t, 6, "@alice:hs", txt("to become an image")),
				ev(t, 7, "@alice:hs", `{"msgtype":"m.image","body":"* IMAGE","m.new_content":{"msgtype":"m.image","body":"IMAGE"},"m.relates_to":{"rel_type":"m.replace","event_id":"$e6"}}`),
				ev(t, 8, "@alice:hs", `{}`, set("unsigned", map[string]any{"redacted_because": map[string]any{"type": "m.room.redaction"}})),
				ev(t, 9, "@alice:hs", editTxt("EDIT OF REDACTED", "$e8")),
				ev(t, 10, "@alice:hs", editTxt("EDIT OF EDIT", "$e4")),
				ev(t, 11, "@alice:hs", `{"msgtype":"m.text","body":"* x","m.relates_to":{"rel_type":"m.replace","event_id":"$e6"}}`),
			)
		},
		want:     []string{`edited="true">` + "\nsecond edit", "to become an image", `redacted="true">` + "\n[message redacted]"},
		notWant:  []string{"original one", "FIRST EDIT", "FOREIGN EDIT", "ORPHAN EDIT", "IMAGE", "EDIT OF", "* "},
		messages: 4,
	}, {
		name: "redactions",
		before: func(t *testing.T) []*event.Event {
			return before(
				ev(t, 1, "@alice:hs", `{}`),
				ev(t, 2, "@alice:hs", txt("SECRET"), set("unsigned", map[string]any{"redacted_because": map[string]any{"type": "m.room.redaction"}})),
			)
		},
		want:    []string{`<message event_id="$e1" author_id="@alice:hs" author_name="Alice" timestamp="2026-07-25T17:21:00Z" redacted="true">` + "\n[message redacted]\n", `event_id="$e2"`},
		notWant: []string{"SECRET"},
	}, {
		name: "reply fallbacks",
		before: func(t *testing.T) []*event.Event {
			return before(
				ev(t, 1, "@alice:hs", txt("root")),
				ev(t, 2, "@alice:hs", replyTxt("> <@bob:hs> QUOTED\n> MORE QUOTED\n\nthe answer", "$e1")),
				ev(t, 3, "@alice:hs", `{"msgtype":"m.text","body":"> <@bob:hs> QUOTED\n\nhtml answer","format":"org.matrix.custom.html","formatted_body":"<mx-reply><blockquote>QUOTED HTML</blockquote></mx-reply>html <b>answer</b>","m.relates_to":{"m.in_reply_to":{"event_id":"$e1"}}}`),
				ev(t, 4, "@alice:hs", txt("> <@bob:hs> not a reply, kept\n\nsince no relation")),
				ev(t, 5, "@alice:hs", `{"msgtype":"m.text","body":"in a thread","m.relates_to":{"rel_type":"m.thread","event_id":"$e1","is_falling_back":true,"m.in_reply_to":{"event_id":"$e4"}}}`),
			)
		},
		want: []string{"\nthe answer\n<reply_to event_id=\"$e1\" />", "\nhtml **answer**\n<reply_to event_id=\"$e1\" />",
			"> &lt;@bob:hs> not a reply, kept"},
		// A thread event is not part of a main-timeline conversation.
		notWant: []string{"QUOTED", `<reply_to event_id="$e4"`, "in a thread"},
	}, {
		name: "display names from state when members fail",
		before: func(t *testing.T) []*event.Event {
			return before(ev(t, 1, "@alice:hs", txt("hello")), ev(t, 2, "@carol:hs", txt("who am I")))
		},
		state: func(t *testing.T) []*event.Event {
			return []*event.Event{
				ev(t, 50, "@alice:hs", `{"membership":"join","displayname":"Alice From State"}`, set("type", "m.room.member"), set("state_key", "@alice:hs")),
				ev(t, 51, "@bob:hs", `{"membership":"join","displayname":"Bob\n\u202eFrom  State"}`, set("type", "m.room.member"), set("state_key", "@bob:hs")),
				ev(t, 52, "@eve:hs", `{"membership":"join","displayname":"WRONG ROOM"}`, set("type", "m.room.member"), set("state_key", "@carol:hs"), set("room_id", string(otherRoom))),
			}
		},
		noMembers: true,
		want:      []string{`author_name="Alice From State"`, `author_name="Bob From State"`, `author_id="@carol:hs" author_name="@carol:hs"`},
		notWant:   []string{"WRONG ROOM"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &mautrix.RespContext{EventsBefore: tc.before(t)}
			if tc.after != nil {
				resp.EventsAfter = tc.after(t)
			}
			if tc.state != nil {
				resp.State = tc.state(t)
			}
			f := &fakeFetcher{resp: resp, members: people()}
			if tc.noMembers {
				f.membersErr = errors.New("forbidden")
			}
			out := build(t, f, testLimits(), invocation("Lisa?", ""))
			for _, s := range tc.want {
				if !strings.Contains(out, s) {
					t.Errorf("missing %q", s)
				}
			}
			for _, s := range tc.notWant {
				if strings.Contains(out, s) {
					t.Errorf("unexpected %q", s)
				}
			}
			if n := strings.Count(out, "<message "); tc.messages > 0 && n != tc.messages {
				t.Errorf("%d messages, want %d", n, tc.messages)
			}
			if len(f.gets) > 0 {
				t.Errorf("fetched %v", f.gets)
			}
			if t.Failed() {
				t.Logf("block:\n%s", out)
			}
		})
	}
}

// TestReplies covers reply resolution, including cycle protection, which a
// real homeserver cannot produce (a reply names an earlier event).
func TestReplies(t *testing.T) {
	type env struct {
		before []*event.Event
		events []*event.Event // served by GetEvent
	}
	for _, tc := range []struct {
		name     string
		env      func(t *testing.T) env
		replyTo  string
		limits   func(l *Limits)
		want     []string
		notWant  []string
		wantGets []id.EventID
	}{{
		name: "cycle",
		env: func(t *testing.T) env {
			return env{events: []*event.Event{
				ev(t, 1, "@alice:hs", replyTxt("X replies to Y", "$e2")),
				ev(t, 2, "@alice:hs", replyTxt("Y replies to X", "$e1")),
			}}
		},
		replyTo: "$e1",
		limits:  func(l *Limits) { l.MaxReplyDepth = 10 },
		want: []string{
			"<reply_to event_id=\"$e1\" author_id=\"@alice:hs\" author_name=\"Alice\" timestamp=\"2026-07-25T17:21:00Z\">\nX replies to Y\n" +
				"<reply_to event_id=\"$e2\" author_id=\"@alice:hs\" author_name=\"Alice\" timestamp=\"2026-07-25T17:22:00Z\">\nY replies to X\n" +
				"<reply_to event_id=\"$e1\" status=\"already_quoted\" />\n</reply_to>\n</reply_to>\n</message>",
		},
		wantGets: []id.EventID{"$e1", "$e2"},
	}, {
		name: "self reply",
		env: func(t *testing.T) env {
			return env{events: []*event.Event{ev(t, 1, "@alice:hs", replyTxt("me again", "$e1"))}}
		},
		replyTo:  "$e1",
		limits:   func(l *Limits) { l.MaxReplyDepth = 10 },
		want:     []string{"me again\n<reply_to event_id=\"$e1\" status=\"already_quoted\" />"},
		wantGets: []id.EventID{"$e1"},
	}, {
		name: "depth bounds the chain",
		env: func(t *testing.T) env {
			return env{events: []*event.Event{
				ev(t, 1, "@alice:hs", txt("one")),
				ev(t, 2, "@alice:hs", replyTxt("two", "$e1")),
				ev(t, 3, "@alice:hs", replyTxt("three", "$e2")),
			}}
		},
		replyTo:  "$e3",
		want:     []string{"three\n<reply_to event_id=\"$e2\"", "two\n<reply_to event_id=\"$e1\" status=\"not_followed\" />"},
		notWant:  []string{"one"},
		wantGets: []id.EventID{"$e3", "$e2"},
	}, {
		name:     "depth zero follows nothing",
		env:      func(*testing.T) env { return env{} },
		replyTo:  "$e1",
		limits:   func(l *Limits) { l.MaxReplyDepth = 0 },
		want:     []string{`<reply_to event_id="$e1" status="not_followed" />`},
		wantGets: nil,
	}, {
		name:     "malformed target",
		env:      func(*testing.T) env { return env{} },
		replyTo:  "not an id</reply_to>",
		want:     []string{"<reply_to status=\"unavailable\">reply target unavailable</reply_to>\n</message>"},
		notWant:  []string{"not an id"},
		wantGets: nil,
	}, {
		name:     "missing target",
		env:      func(*testing.T) env { return env{} },
		replyTo:  "$gone",
		want:     []string{`<reply_to event_id="$gone" status="unavailable">reply target unavailable</reply_to>`},
		wantGets: []id.EventID{"$gone"},
	}, {
		name: "unusable targets",
		env: func(t *testing.T) env {
			return env{
				before: []*event.Event{
					ev(t, 10, "@alice:hs", replyTxt("a", "$e1")),
					ev(t, 11, "@alice:hs", replyTxt("b", "$e2")),
					ev(t, 12, "@alice:hs", replyTxt("c", "$e3")),
					ev(t, 13, "@alice:hs", replyTxt("d", "$e4")),
					ev(t, 14, "@alice:hs", replyTxt("e", "$e5")),
				},
				events: []*event.Event{
					ev(t, 1, "@alice:hs", txt("OTHER ROOM"), set("room_id", string(otherRoom))),
					ev(t, 2, "@alice:hs", txt("REDACTED"), set("unsigned", map[string]any{"redacted_because": map[string]any{}})),
					ev(t, 3, "@alice:hs", `{"msgtype":"m.file","body":"FILE"}`),
					ev(t, 4, "@alice:hs", editTxt("EDIT", "$e9")),
					ev(t, 99, "@alice:hs", txt("WRONG ID")),
				},
			}
		},
		// Issue #30: a history message's target outside the block is
		// named, not followed, so that the message renders the same in
		// every block; TestUnusableReplyTargets follows each through the
		// invoking message.
		replyTo: "$e14",
		limits:  func(l *Limits) { l.MaxReplyDepth = 10 },
		want: []string{
			`<reply_to event_id="$e1" />`, `<reply_to event_id="$e2" />`,
			`<reply_to event_id="$e3" />`, `<reply_to event_id="$e4" />`,
			`<reply_to event_id="$e5" />`, "Lisa?\n<reply_to event_id=\"$e14\" />",
		},
		notWant:  []string{"OTHER ROOM", "REDACTED", "FILE", "EDIT", "WRONG ID"},
		wantGets: nil,
	}, {
		name: "target fetched but outside the block comes from the window",
		env: func(t *testing.T) env {
			return env{before: []*event.Event{
				ev(t, 1, "@alice:hs", txt("older, in the window")),
				ev(t, 2, "@alice:hs", `{"msgtype":"m.image","body":"pic"}`),
				ev(t, 3, "@alice:hs", `{}`),
				ev(t, 4, "@alice:hs", replyTxt("reply to the image", "$e2")),
				ev(t, 5, "@alice:hs", replyTxt("reply to the redacted", "$e3")),
			}}
		},
		replyTo: "$e1",
		limits:  func(l *Limits) { l.MaxEvents = 3; l.MaxReplyDepth = 10 },
		want: []string{"Lisa?\n<reply_to event_id=\"$e1\" author_id=\"@alice:hs\" author_name=\"Alice\" timestamp=\"2026-07-25T17:21:00Z\">\nolder, in the window\n</reply_to>",
			`<reply_to event_id="$e2" />`, `<reply_to event_id="$e3" />`},
		wantGets: nil,
	}, {
		name: "one excerpt per target",
		env: func(t *testing.T) env {
			return env{
				before: []*event.Event{ev(t, 10, "@alice:hs", replyTxt("me too", "$e1"))},
				events: []*event.Event{ev(t, 1, "@alice:hs", txt("popular"))},
			}
		},
		replyTo:  "$e1",
		want:     []string{"Lisa?\n<reply_to event_id=\"$e1\" author_id", "me too\n<reply_to event_id=\"$e1\" />"},
		wantGets: []id.EventID{"$e1"},
	}, {
		name: "excerpts are short and use the remaining characters",
		env: func(t *testing.T) env {
			return env{
				before: []*event.Event{ev(t, 10, "@alice:hs", replyTxt(strings.Repeat("b", 10), "$e2"))},
				events: []*event.Event{
					ev(t, 1, "@alice:hs", txt(strings.Repeat("a", 300))),
					ev(t, 2, "@alice:hs", txt("NEVER FETCHED")),
				},
			}
		},
		replyTo: "$e1",
		limits:  func(l *Limits) { l.MaxCharacters = 5 + 10 + excerptChars },
		want: []string{"\n" + strings.Repeat("a", excerptChars) + truncMarker + "\n",
			`<reply_to event_id="$e2" />`},
		notWant:  []string{"NEVER"},
		wantGets: []id.EventID{"$e1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.env(t)
			f := &fakeFetcher{
				resp:    &mautrix.RespContext{EventsBefore: before(e.before...)},
				members: people(),
				events:  map[id.EventID]*event.Event{},
			}
			for _, x := range e.events {
				key := x.ID
				if x.ID == "$e99" {
					key = "$e5" // served under another ID
				}
				f.events[key] = x
			}
			l := testLimits()
			if tc.limits != nil {
				tc.limits(&l)
			}
			out := build(t, f, l, invocation("Lisa?", tc.replyTo))
			for _, s := range tc.want {
				if !strings.Contains(out, s) {
					t.Errorf("missing %q", s)
				}
			}
			for _, s := range tc.notWant {
				if strings.Contains(out, s) {
					t.Errorf("unexpected %q", s)
				}
			}
			if !slices.Equal(f.gets, tc.wantGets) {
				t.Errorf("fetched %v, want %v", f.gets, tc.wantGets)
			}
			if t.Failed() {
				t.Logf("block:\n%s", out)
			}
		})
	}
}

// TestBudgets checks the budget order with exact character counts.
func TestBudgets(t *testing.T) {
	evs := func(t *testing.T) []*event.Event {
		return []*event.Event{
			ev(t, 1, "@alice:hs", txt("aaaaaaaaaa")),           // 10
			ev(t, 2, "@alice:hs", txt("bbbbbbbbbbbbbbbbbbbb")), // 20
			ev(t, 3, "@alice:hs", txt("ccccc")),                // 5
		}
	}
	for _, tc := range []struct {
		name   string
		limits Limits
		seqs   []string // texts in the block, in order
	}{
		{"all fit", Limits{MaxEvents: 4, MaxCharacters: 40, MaxEventCharacters: 40}, []string{"a", "b", "c", "i"}},
		{"event count", Limits{MaxEvents: 2, MaxCharacters: 40, MaxEventCharacters: 40}, []string{"c", "i"}},
		{"one event only", Limits{MaxEvents: 1, MaxCharacters: 40, MaxEventCharacters: 40}, []string{"i"}},
		// Invocation 4 + c 5 + b 20 = 29; a (10) would exceed 38, and the
		// walk stops there.
		{"characters", Limits{MaxEvents: 10, MaxCharacters: 38, MaxEventCharacters: 38}, []string{"b", "c", "i"}},
		// b does not fit, so a is not considered even though it would.
		{"walk stops at the first misfit", Limits{MaxEvents: 10, MaxCharacters: 20, MaxEventCharacters: 20}, []string{"c", "i"}},
		// Each capped at 3: 3+3+3+3 = 12.
		{"event cap first", Limits{MaxEvents: 10, MaxCharacters: 12, MaxEventCharacters: 3}, []string{"a", "b", "c", "i"}},
		// The invocation stays even when it alone fills the budget.
		{"invocation always", Limits{MaxEvents: 10, MaxCharacters: 2, MaxEventCharacters: 2}, []string{"i"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeFetcher{resp: &mautrix.RespContext{EventsBefore: before(evs(t)...)}, members: people()}
			out := build(t, f, tc.limits, invocation("iiii", ""))
			var got []string
			for _, m := range checkWellFormed(t, out) {
				got = append(got, strings.TrimSpace(m.Text)[:1])
			}
			if !slices.Equal(got, tc.seqs) {
				t.Fatalf("kept %v, want %v\n%s", got, tc.seqs, out)
			}
		})
	}
}

// TestLogsArePrivate checks that a failed fetch is logged by status, with
// hashed IDs and without message text.
func TestLogsArePrivate(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f := &fakeFetcher{ctxErr: notFound(), membersErr: errors.New("down"), events: map[id.EventID]*event.Event{}}
	b := New(f, testBot, testLimits()).WithLogger(log)
	if _, err := b.Build(context.Background(), invocation("SECRET BODY", "$target")); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, `"status":"404"`) || !strings.Contains(out, "sync batch") {
		t.Fatalf("failure not logged:\n%s", out)
	}
	for _, leak := range []string{"SECRET", "$inv", "$target", "!room:hs", "@bob:hs"} {
		if strings.Contains(out, leak) {
			t.Errorf("log shows %q:\n%s", leak, out)
		}
	}
}

// TestConcurrentBuilds shares one Builder and one set of fetched events
// between goroutines; run with -race it shows Build neither keeps state
// nor writes to the events it reads.
func TestConcurrentBuilds(t *testing.T) {
	f := &fakeFetcher{
		resp: &mautrix.RespContext{EventsBefore: before(
			ev(t, 1, "@alice:hs", `{"msgtype":"m.text","body":"x","format":"org.matrix.custom.html","formatted_body":"<b>one</b>"}`),
			ev(t, 2, "@alice:hs", editTxt("one, edited", "$e1")),
			ev(t, 3, "@alice:hs", replyTxt("two", "$e0")),
		)},
		events:  map[id.EventID]*event.Event{"$e0": ev(t, 0, "@bob:hs", txt("zero"))},
		members: people(),
	}
	b := New(f, testBot, testLimits())
	want := build(t, f, testLimits(), invocation("Lisa?", "$e1"))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			got, err := b.Build(context.Background(), invocation("Lisa?", "$e1"))
			if err != nil || got != want {
				t.Errorf("concurrent build differs: %v\n%s", err, got)
			}
		})
	}
	wg.Wait()
	for _, e := range f.resp.EventsBefore {
		if e.Content.Parsed != nil {
			t.Fatalf("event %s was modified", e.ID)
		}
	}
}

// TestFallbackToSyncBatch: when GET /context fails, the events that came
// with the invocation in the same /sync response are the context; events
// of another room among them are still dropped.
func TestFallbackToSyncBatch(t *testing.T) {
	f := &fakeFetcher{ctxErr: notFound(), membersErr: errors.New("down"), events: map[id.EventID]*event.Event{}}
	b := New(f, testBot, testLimits())
	c := invocation("what did Bob say?", "")
	raw := func(id, room, sender, body string) []byte {
		b, _ := json.Marshal(map[string]any{"event_id": id, "room_id": room, "sender": sender, "type": "m.room.message",
			"origin_server_ts": 1700000000000, "content": map[string]any{"msgtype": "m.text", "body": body}})
		return b
	}
	c.BatchEvents = [][]byte{
		raw("$b1", c.GetRoomId(), "@bob:hs", "BATCH-CANARY from bob"),
		raw("$x1", "!elsewhere:hs", "@eve:hs", "OTHER-ROOM-CANARY"),
		[]byte(`{not json`),
	}
	out, err := b.Build(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "BATCH-CANARY") || strings.Contains(out, "OTHER-ROOM-CANARY") || !strings.Contains(out, "what did Bob say?") {
		t.Fatalf("fallback block:\n%s", out)
	}
}

// TestEscapingCannotInflateTheBlock: budgets count escaped text, so a room
// full of "&" (five characters each once escaped) cannot push the block
// far past context.max_characters; markup adds at most a bounded amount
// per message.
func TestEscapingCannotInflateTheBlock(t *testing.T) {
	var evs []*event.Event
	for i := 1; i <= 6; i++ {
		evs = append(evs, ev(t, i, "@alice:hs", txt(strings.Repeat("&", 3999))))
	}
	lim := Limits{MaxEvents: 40, MaxCharacters: 24000, MaxEventCharacters: 4000, MaxReplyDepth: 2}
	f := &fakeFetcher{resp: &mautrix.RespContext{EventsBefore: before(evs...)}, members: people()}
	out := build(t, f, lim, invocation(strings.Repeat("&", 3999), ""))
	const markupPerMessage = 400
	if n := utf8.RuneCountInString(out); n > lim.MaxCharacters+lim.MaxEvents*markupPerMessage {
		t.Fatalf("block is %d characters for max_characters %d", n, lim.MaxCharacters)
	}
	if n := len(checkWellFormed(t, out)); n < 2 {
		t.Fatalf("only %d messages kept", n)
	}
}
