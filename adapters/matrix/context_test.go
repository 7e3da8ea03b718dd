package matrix

import (
	"encoding/json"
	"reflect"
	"testing"

	"maunium.net/go/mautrix/event"
)

func TestDecodeContext(t *testing.T) {
	const resp = `{
	  "start": "s1", "end": "s9",
	  "event": {"event_id": "$anchor", "type": "m.room.message", "content": {"body": "not decoded"}},
	  "events_after": [{"this is": "never decoded"}],
	  "events_before": [
	    {"event_id": "$new", "type": "m.room.message", "sender": "@a:hs", "room_id": "!r:hs", "origin_server_ts": 30,
	     "content": {"msgtype": "m.text", "body": "hi", "format": "org.matrix.custom.html", "formatted_body": "<b>hi</b>"}},
	    {"event_id": "$badts", "type": "m.room.message", "sender": "@a:hs", "origin_server_ts": "yesterday", "content": {}},
	    "not an object",
	    {"event_id": "$gone", "type": "m.room.message", "sender": "@b:hs", "origin_server_ts": 20, "content": {},
	     "unsigned": {"redacted_because": {"type": "m.room.redaction"}}},
	    {"event_id": "$nullred", "type": "m.room.message", "sender": "@b:hs", "origin_server_ts": 15, "content": {"body": "x"},
	     "unsigned": {"redacted_because": null, "age": 5}},
	    {"event_id": "$weird", "type": "m.room.message", "sender": "@b:hs", "origin_server_ts": 10, "content": 5}
	  ],
	  "state": [
	    {"event_id": "$m1", "type": "m.room.member", "state_key": "@a:hs", "sender": "@a:hs", "content": {"membership": "join", "displayname": "Ann"}},
	    {"event_id": "$m2", "type": "m.room.member", "state_key": "@b:hs", "sender": "@b:hs", "content": {"membership": 7, "displayname": "Bo"}},
	    {"event_id": "$m3", "type": "m.room.member", "state_key": "@c:hs", "sender": "@c:hs", "content": {"displayname": 9}},
	    {"event_id": "$n", "type": "m.room.name", "state_key": "", "sender": "@a:hs", "content": {"name": "Room"}},
	    []
	  ]
	}`
	got, err := parseContext([]byte(resp))
	if err != nil {
		t.Fatal(err)
	}
	if got.Start != "s1" || got.End != "s9" || got.Event != nil || got.EventsAfter != nil {
		t.Fatalf("tokens, anchor or after: %+v", got)
	}
	want := []struct {
		id       string
		ts       int64
		redacted bool
		content  string
	}{
		{"$new", 30, false, `{"msgtype": "m.text", "body": "hi", "format": "org.matrix.custom.html", "formatted_body": "<b>hi</b>"}`},
		{"$gone", 20, true, `{}`},
		{"$nullred", 15, false, `{"body": "x"}`},
		{"$weird", 10, false, `5`},
	}
	if len(got.EventsBefore) != len(want) {
		t.Fatalf("events before: got %d, want %d", len(got.EventsBefore), len(want))
	}
	for i, w := range want {
		e := got.EventsBefore[i]
		if string(e.ID) != w.id || e.Timestamp != w.ts || (e.Unsigned.RedactedBecause != nil) != w.redacted ||
			string(e.Content.VeryRaw) != w.content || e.Type != event.EventMessage || e.StateKey != nil {
			t.Errorf("event %d: got %s ts=%d redacted=%v content=%s type=%v, want %+v",
				i, e.ID, e.Timestamp, e.Unsigned.RedactedBecause != nil, e.Content.VeryRaw, e.Type, w)
		}
		if e.Content.Raw != nil || e.Content.Parsed != nil {
			t.Errorf("event %d: content decoded (%v, %v); it must stay raw", i, e.Content.Raw, e.Content.Parsed)
		}
	}
	if e := got.EventsBefore[0]; e.Sender != "@a:hs" || e.RoomID != "!r:hs" {
		t.Errorf("sender or room: %s %s", e.Sender, e.RoomID)
	}
	if len(got.State) != 3 {
		t.Fatalf("member state: got %d events, want 3", len(got.State))
	}
	if m, ok := got.State[0].Content.Parsed.(*event.MemberEventContent); !ok || m.Displayname != "Ann" ||
		got.State[0].StateKey == nil || *got.State[0].StateKey != "@a:hs" || got.State[0].Type != event.StateMember {
		t.Errorf("member Ann: %+v", got.State[0])
	}
	// A badly typed field elsewhere does not cost the name; a name that is
	// no string gives none.
	if m, ok := got.State[1].Content.Parsed.(*event.MemberEventContent); !ok || m.Displayname != "Bo" {
		t.Errorf("member Bo with a malformed membership: %+v", got.State[1].Content.Parsed)
	}
	if got.State[2].Content.Parsed != nil {
		t.Errorf("a numeric display name was parsed: %+v", got.State[2].Content.Parsed)
	}
}

// A well-formed response takes the one-pass path, which must give what
// decoding event by event gives.
func TestParseContextFastPathMatches(t *testing.T) {
	const resp = `{"start": "a", "end": "b", "events_before": [
	    {"event_id": "$1", "type": "m.room.message", "sender": "@a:hs", "room_id": "!r:hs", "origin_server_ts": 3, "content": {"body": "x"}},
	    {"event_id": "$2", "type": "m.room.message", "sender": "@b:hs", "origin_server_ts": 2, "content": {},
	     "unsigned": {"redacted_because": {}}},
	    null],
	  "state": [
	    {"event_id": "$m", "type": "m.room.member", "state_key": "@a:hs", "content": {"displayname": "Ann", "membership": "join"}},
	    {"event_id": "$t", "type": "m.room.topic", "state_key": "", "content": {"topic": "t"}}]}`
	fast, ok := parseContextFast([]byte(resp))
	if !ok {
		t.Fatal("a well-formed response did not take the one-pass path")
	}
	var w wireContext
	if err := json.Unmarshal([]byte(resp), &w); err != nil {
		t.Fatal(err)
	}
	if slow := decodeContext(&w); !reflect.DeepEqual(fast, slow) {
		t.Fatalf("one pass:\n%+v\nevent by event:\n%+v", fast, slow)
	}
	if len(fast.EventsBefore) != 3 || len(fast.State) != 1 {
		t.Fatalf("got %d events and %d member events", len(fast.EventsBefore), len(fast.State))
	}
	if _, ok := parseContextFast([]byte(`{"events_before": [{"origin_server_ts": "x"}]}`)); ok {
		t.Fatal("a malformed event took the one-pass path")
	}
	if _, err := parseContext([]byte(`{"events_before": 5}`)); err == nil {
		t.Fatal("an undecodable response gave no error")
	}
}
