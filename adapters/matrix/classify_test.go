package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

const (
	testBot  = "@lisa:hs"
	testRoom = id.RoomID("!room:hs")
)

func mkEvent(t *testing.T, sender, typ string, content map[string]any, mutate func(*event.Event)) *event.Event {
	t.Helper()
	raw, err := json.Marshal(map[string]any{
		"event_id": "$e", "sender": sender, "type": typ, "origin_server_ts": 1700000000000,
		"room_id": string(testRoom), "content": content,
	})
	if err != nil {
		t.Fatal(err)
	}
	var evt event.Event
	if err := json.Unmarshal(raw, &evt); err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(&evt)
	}
	return &evt
}

func text(body string) map[string]any { return map[string]any{"msgtype": "m.text", "body": body} }

func TestClassify(t *testing.T) {
	c := NewClassifier(testBot, []string{string(testRoom)}, []string{"Lisa", "@Lisa"})
	lisaEvents := map[string]bool{"$lisa": true}
	checker := func(_ context.Context, room, ev string) (bool, error) {
		if ev == "$broken" {
			return false, errors.New("homeserver down")
		}
		return room == string(testRoom) && lisaEvents[ev], nil
	}
	withReply := func(target string, body string) map[string]any {
		m := text(body)
		m["m.relates_to"] = map[string]any{"m.in_reply_to": map[string]any{"event_id": target}}
		return m
	}
	cases := []struct {
		name    string
		room    id.RoomID
		evt     *event.Event
		want    Verdict
		wantRaw string // expected candidate body, when accepted
	}{
		{"structured mention", testRoom, mkEvent(t, "@u:hs", "m.room.message", map[string]any{"msgtype": "m.text", "body": "hey you", "m.mentions": map[string]any{"user_ids": []string{testBot}}}, nil), TriggerMention, "hey you"},
		{"alias word", testRoom, mkEvent(t, "@u:hs", "m.room.message", text("Lisa, what time is it?"), nil), TriggerAlias, "Lisa, what time is it?"},
		{"alias mixed case", testRoom, mkEvent(t, "@u:hs", "m.room.message", text("hey LISA help"), nil), TriggerAlias, ""},
		{"alias with at sign", testRoom, mkEvent(t, "@u:hs", "m.room.message", text("ping @lisa please"), nil), TriggerAlias, ""},
		{"alias at end", testRoom, mkEvent(t, "@u:hs", "m.room.message", text("thanks lisa"), nil), TriggerAlias, ""},
		{"full user id", testRoom, mkEvent(t, "@u:hs", "m.room.message", text("cc @lisa:hs"), nil), TriggerAlias, ""},
		{"alias inside a word", testRoom, mkEvent(t, "@u:hs", "m.room.message", text("Mona Lisabeth and Elisa"), nil), RejectNotAddress, ""},
		{"alias after a combining mark", testRoom, mkEvent(t, "@u:hs", "m.room.message", text("Ne\u0301lisa and lisa\u0301"), nil), RejectNotAddress, ""},
		{"alias after underscore", testRoom, mkEvent(t, "@u:hs", "m.room.message", text("see my_lisa file"), nil), RejectNotAddress, ""},
		{"alias only in reply fallback", testRoom, mkEvent(t, "@u:hs", "m.room.message", withReply("$other", "> <@u:hs> Lisa said hi\n\nnice"), nil), RejectNotAddress, ""},
		{"reply to lisa", testRoom, mkEvent(t, "@u:hs", "m.room.message", withReply("$lisa", "> <@lisa:hs> old\n\nand then?"), nil), TriggerReply, "and then?"},
		{"reply to someone else", testRoom, mkEvent(t, "@u:hs", "m.room.message", withReply("$other", "ok"), nil), RejectNotAddress, ""},
		{"reply lookup fails", testRoom, mkEvent(t, "@u:hs", "m.room.message", withReply("$broken", "ok"), nil), RejectReplyLookup, ""},
		{"own event", testRoom, mkEvent(t, testBot, "m.room.message", text("Lisa here"), nil), RejectOwn, ""},
		{"edit", testRoom, mkEvent(t, "@u:hs", "m.room.message", map[string]any{"msgtype": "m.text", "body": "* Lisa?", "m.new_content": text("Lisa?"), "m.relates_to": map[string]any{"rel_type": "m.replace", "event_id": "$orig"}}, nil), RejectEdit, ""},
		{"notice", testRoom, mkEvent(t, "@u:hs", "m.room.message", map[string]any{"msgtype": "m.notice", "body": "Lisa"}, nil), RejectType, ""},
		{"image", testRoom, mkEvent(t, "@u:hs", "m.room.message", map[string]any{"msgtype": "m.image", "body": "Lisa.png"}, nil), RejectType, ""},
		{"reaction", testRoom, mkEvent(t, "@u:hs", "m.reaction", map[string]any{"m.relates_to": map[string]any{"rel_type": "m.annotation", "event_id": "$x", "key": "Lisa"}}, nil), RejectType, ""},
		{"redaction event", testRoom, mkEvent(t, "@u:hs", "m.room.redaction", map[string]any{"redacts": "$x"}, nil), RejectType, ""},
		{"redacted message", testRoom, mkEvent(t, "@u:hs", "m.room.message", map[string]any{}, func(e *event.Event) {
			e.Unsigned.RedactedBecause = &event.Event{ID: "$r"}
		}), RejectRedacted, ""},
		{"empty content", testRoom, mkEvent(t, "@u:hs", "m.room.message", map[string]any{}, nil), RejectRedacted, ""},
		{"malformed body type", testRoom, mkEvent(t, "@u:hs", "m.room.message", map[string]any{"msgtype": "m.text", "body": 42}, nil), RejectMalformed, ""},
		{"other room", "!elsewhere:hs", mkEvent(t, "@u:hs", "m.room.message", text("Lisa?"), nil), RejectRoom, ""},
		{"nil event", testRoom, nil, RejectMalformed, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cand, got := c.Classify(context.Background(), tc.room, tc.evt, checker)
			if got != tc.want {
				t.Fatalf("verdict = %s, want %s", got, tc.want)
			}
			if got.Accepted() != (cand != nil) {
				t.Fatalf("accepted=%v but candidate=%v", got.Accepted(), cand)
			}
			if cand != nil {
				if cand.GetRoomId() != string(tc.room) || cand.GetEventId() != "$e" || cand.GetTrigger() != string(tc.want) {
					t.Fatalf("candidate = %v", cand)
				}
				if tc.wantRaw != "" && cand.GetBody() != tc.wantRaw {
					t.Fatalf("candidate body = %q, want %q", cand.GetBody(), tc.wantRaw)
				}
			}
		})
	}
}

// TestReplyTargets: a reply to something that cannot be an event ID is not
// a reply to Lisa and is never looked up; a checker's
// ErrReplyTargetRejected is a rejection, not a failure; an alias or a
// mention still counts whatever the reply target.
func TestReplyTargets(t *testing.T) {
	c := NewClassifier(testBot, []string{string(testRoom)}, []string{"Lisa"})
	var asked []string
	checker := func(_ context.Context, _, ev string) (bool, error) {
		asked = append(asked, ev)
		switch ev {
		case "$refused":
			return false, fmt.Errorf("%w (400 M_INVALID_PARAM)", ErrReplyTargetRejected)
		case "$down":
			return false, errors.New("homeserver down")
		}
		return ev == "$lisa" || ev == "$"+strings.Repeat("x", 254), nil
	}
	reply := func(target, body string) map[string]any {
		m := text(body)
		m["m.relates_to"] = map[string]any{"m.in_reply_to": map[string]any{"event_id": target}}
		return m
	}
	for _, tc := range []struct {
		name, target, body string
		want               Verdict
		asked              bool
	}{
		{"to Lisa", "$lisa", "ok", TriggerReply, true},
		{"room v1 form", "$abc123:example.org", "ok", RejectNotAddress, true},
		{"room v3 form", "$acR1l0raoZnm60CBwAVgqbZqoO/mYU81xysh1u7XcJk", "ok", RejectNotAddress, true},
		{"room v4 form", "$acR1l0raoZnm60CBwAVgqbZqoO_mYU81xysh1u7XcJk", "ok", RejectNotAddress, true},
		{"255 bytes", "$" + strings.Repeat("x", 254), "ok", TriggerReply, true},
		{"256 bytes", "$" + strings.Repeat("x", 255), "ok", RejectReplyTargetInvalid, false},
		{"60 KB", "$" + strings.Repeat("x", 60<<10), "ok", RejectReplyTargetInvalid, false},
		{"no dollar", "not-an-id", "ok", RejectReplyTargetInvalid, false},
		{"a dollar alone", "$", "ok", RejectReplyTargetInvalid, false},
		{"a space", "$a b", "ok", RejectReplyTargetInvalid, false},
		{"a tab", "$a\tb", "ok", RejectReplyTargetInvalid, false},
		{"a NUL", "$a\x00b", "ok", RejectReplyTargetInvalid, false},
		{"DEL", "$a\x7fb", "ok", RejectReplyTargetInvalid, false},
		{"non-ASCII", "$ä", "ok", RejectReplyTargetInvalid, false},
		{"invalid UTF-8 (decoded as U+FFFD)", "$\xff", "ok", RejectReplyTargetInvalid, false},
		{"refused by the homeserver", "$refused", "ok", RejectReplyTargetRejected, true},
		{"homeserver down", "$down", "ok", RejectReplyLookup, true},
		{"invalid target, but an alias", "not-an-id", "Lisa?", TriggerAlias, false},
		{"refused target, but an alias", "$refused", "Lisa?", TriggerAlias, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked = nil
			cand, got := c.Classify(context.Background(), testRoom, mkEvent(t, "@u:hs", "m.room.message", reply(tc.target, tc.body), nil), checker)
			if got != tc.want {
				t.Fatalf("verdict = %s, want %s", got, tc.want)
			}
			if got.Accepted() != (cand != nil) {
				t.Fatalf("accepted=%v but candidate=%v", got.Accepted(), cand)
			}
			if (len(asked) > 0) != tc.asked {
				t.Fatalf("checker asked about %d targets, want asked=%v", len(asked), tc.asked)
			}
		})
	}
}
