package matrix

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
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

// referenceEvent is how encoding/json reads an event's envelope: the
// decoder before parseContext moved to gjson, kept to compare against.
type referenceEvent struct {
	ID        id.EventID      `json:"event_id"`
	Type      string          `json:"type"`
	Sender    id.UserID       `json:"sender"`
	RoomID    id.RoomID       `json:"room_id"`
	StateKey  *string         `json:"state_key"`
	Timestamp int64           `json:"origin_server_ts"`
	Content   json.RawMessage `json:"content"`
	Unsigned  struct {
		RedactedBecause json.RawMessage `json:"redacted_because"`
	} `json:"unsigned"`
}

// parseContext gives, event by event, what encoding/json gives for the
// envelopes it decodes, and leaves out exactly the events encoding/json
// fails on.
func TestParseContextAgreesWithEncodingJSON(t *testing.T) {
	events := []string{
		`{"event_id": "$1", "type": "m.room.message", "sender": "@a:hs", "room_id": "!r:hs", "origin_server_ts": 3, "content": {"body": "x"}}`,
		`{"event_id": "$2", "type": "m.room.message", "sender": "@b:hs", "origin_server_ts": 2, "content": {}, "unsigned": {"redacted_because": {}}}`,
		`{"event_id": "$3", "type": "m.room.member", "state_key": "@a:hs", "content": {"displayname": "Ann"}, "unsigned": {"age": 4}}`,
		`{"event_id": "$4\u00e9", "type": "m.room.message", "sender": "@c:hs", "origin_server_ts": null, "content": null, "unsigned": null}`,
		`{"event_id": "$5", "type": "m.room.message", "origin_server_ts": 9007199254740993, "content": [1, 2]}`,
		`null`,
		`{"event_id": 5}`,
		`{"event_id": "$6", "origin_server_ts": 1.5}`,
		`{"event_id": "$7", "origin_server_ts": "x"}`,
		`{"event_id": "$8", "state_key": 3}`,
		`{"event_id": "$9", "unsigned": 3}`,
		`[]`,
		`"event"`,
	}
	resp, err := parseContext([]byte(`{"start": "a", "end": "b", "events_before": [` + strings.Join(events, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	var want []*event.Event
	for _, raw := range events {
		var w referenceEvent
		if json.Unmarshal([]byte(raw), &w) != nil {
			continue
		}
		evt := &event.Event{ID: w.ID, Type: event.NewEventType(w.Type), Sender: w.Sender, RoomID: w.RoomID, StateKey: w.StateKey,
			Timestamp: w.Timestamp, Content: event.Content{VeryRaw: w.Content}}
		if w.StateKey != nil {
			evt.Type.Class = event.StateEventType
		}
		if rb := bytes.TrimSpace(w.Unsigned.RedactedBecause); len(rb) > 0 && !bytes.Equal(rb, []byte("null")) {
			evt.Unsigned.RedactedBecause = &event.Event{}
		}
		if string(evt.Content.VeryRaw) == "null" && !strings.Contains(raw, `"content"`) {
			evt.Content.VeryRaw = nil
		}
		want = append(want, evt)
	}
	if len(resp.EventsBefore) != len(want) {
		t.Fatalf("got %d events, encoding/json decodes %d", len(resp.EventsBefore), len(want))
	}
	for i := range want {
		got := resp.EventsBefore[i]
		if string(got.Content.VeryRaw) == "null" && want[i].Content.VeryRaw == nil {
			got.Content.VeryRaw = nil // encoding/json leaves a null RawMessage unset
		}
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, got, want[i])
		}
	}
	for _, bad := range []string{`{"events_before": 5}`, `{"start": 5}`, `[]`, `{"events_before": [`} {
		if _, err := parseContext([]byte(bad)); err == nil {
			t.Errorf("%s: an undecodable response gave no error", bad)
		}
	}
}
