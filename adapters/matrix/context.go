package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Context fetches the events around eventID (GET /context), for the
// conversation-context builder. Only what the builder reads is decoded:
// the events before the anchor (content kept raw in Content.VeryRaw; a
// redaction shows as a non-nil, empty Unsigned.RedactedBecause) and the
// member state (content parsed as member content). An event that does not
// decode is left out instead of failing the whole window; the anchor and
// the events after it are not returned.
func (c *Client) Context(ctx context.Context, roomID id.RoomID, eventID id.EventID, filter *mautrix.FilterPart, limit int) (*mautrix.RespContext, error) {
	query := map[string]string{}
	if filter != nil {
		f, err := json.Marshal(filter)
		if err != nil {
			return nil, err
		}
		query["filter"] = string(f)
	}
	if limit != 0 {
		query["limit"] = strconv.Itoa(limit)
	}
	url := c.cli.BuildURLWithQuery(mautrix.ClientURLPath{"v3", "rooms", roomID, "context", eventID}, query)
	body, err := c.cli.MakeRequest(ctx, http.MethodGet, url, nil, nil)
	if err != nil {
		return nil, err
	}
	return parseContext(body)
}

// parseContext decodes a GET /context response body: the events before
// the anchor and the member state, nothing else (the anchor and the events
// after it are skipped unread). It reads the body with gjson in one pass
// after one validation pass; encoding/json decoded a lived-in room's
// window at about 30 MB/s, a third of a millisecond on the mention's
// path. Each event is held to the types mautrix would decode (strings,
// an integer timestamp, objects); an event that does not match is left
// out instead of failing the whole window.
func parseContext(body []byte) (*mautrix.RespContext, error) {
	if !gjson.ValidBytes(body) {
		return nil, errors.New("matrix: undecodable GET /context response: not JSON")
	}
	root := gjson.Parse(string(body)) // one copy; every Raw below is a slice of it
	if !root.IsObject() {
		return nil, errors.New("matrix: undecodable GET /context response: not an object")
	}
	var start, end string
	var before, state gjson.Result
	ok := true
	root.ForEach(func(key, v gjson.Result) bool { // one pass; the last of a repeated key counts
		switch key.Str {
		case "start":
			start, ok = optString(v)
		case "end":
			end, ok = optString(v)
		case "events_before":
			before = v
		case "state":
			state = v
		}
		return ok
	})
	if !ok {
		return nil, errors.New("matrix: undecodable GET /context response: a token is no string")
	}
	for _, list := range []gjson.Result{before, state} {
		if list.Exists() && list.Type != gjson.Null && !list.IsArray() {
			return nil, errors.New("matrix: undecodable GET /context response: an event list is no array")
		}
	}
	resp := &mautrix.RespContext{Start: start, End: end, EventsBefore: []*event.Event{}}
	before.ForEach(func(_, raw gjson.Result) bool {
		if evt := decodeEvent(raw); evt != nil {
			resp.EventsBefore = append(resp.EventsBefore, evt)
		}
		return true
	})
	state.ForEach(func(_, raw gjson.Result) bool {
		if evt := memberEvent(decodeEvent(raw)); evt != nil {
			resp.State = append(resp.State, evt)
		}
		return true
	})
	return resp, nil
}

// optString returns a string field, "" for an absent or null one, and
// false for any other type.
func optString(r gjson.Result) (string, bool) {
	switch r.Type {
	case gjson.String:
		return r.String(), true
	case gjson.Null: // also absent
		return "", true
	}
	return "", false
}

// memberEvent returns evt with its member content parsed, or nil if evt
// is no member event.
func memberEvent(evt *event.Event) *event.Event {
	if evt == nil || evt.Type.Type != event.StateMember.Type {
		return nil
	}
	// Only the display name is read: a badly typed field elsewhere in the
	// content must not cost the name (mautrix kept every field in a map).
	content := gjson.ParseBytes(evt.Content.VeryRaw)
	if content.IsObject() || content.Type == gjson.Null {
		if name, ok := optString(content.Get("displayname")); ok {
			evt.Content.Parsed = &event.MemberEventContent{Displayname: name}
		}
	}
	return evt
}

// decodeEvent decodes one event's envelope, with its content left raw
// (Content.VeryRaw), or returns nil if it is not an event object or a
// field has the wrong type. null stands for an event with no fields, as
// encoding/json read it. A redaction shows as a non-nil, empty
// Unsigned.RedactedBecause. The object is read in one pass (gjson's
// GetMany reads it once per field). A field given twice counts once, the
// last time, as encoding/json has it.
func decodeEvent(raw gjson.Result) *event.Event {
	switch {
	case raw.Type == gjson.Null:
		return &event.Event{}
	case !raw.IsObject():
		return nil
	}
	evt := &event.Event{}
	var typ string
	ok := true
	raw.ForEach(func(key, v gjson.Result) bool {
		switch key.Str {
		case "event_id":
			var s string
			s, ok = optString(v)
			evt.ID = id.EventID(s)
		case "type":
			typ, ok = optString(v)
		case "sender":
			var s string
			s, ok = optString(v)
			evt.Sender = id.UserID(s)
		case "room_id":
			var s string
			s, ok = optString(v)
			evt.RoomID = id.RoomID(s)
		case "state_key":
			evt.StateKey = nil
			switch v.Type {
			case gjson.String:
				k := v.String()
				evt.StateKey = &k
			case gjson.Null:
			default:
				ok = false
			}
		case "origin_server_ts":
			evt.Timestamp, ok = optInt(v)
		case "content":
			evt.Content.VeryRaw = json.RawMessage(v.Raw)
		case "unsigned":
			evt.Unsigned.RedactedBecause = nil
			switch {
			case v.IsObject():
				if rb := v.Get("redacted_because"); rb.Exists() && rb.Type != gjson.Null {
					evt.Unsigned.RedactedBecause = &event.Event{}
				}
			case v.Type != gjson.Null:
				ok = false
			}
		}
		return ok
	})
	if !ok {
		return nil
	}
	evt.Type = event.NewEventType(typ)
	if evt.StateKey != nil {
		evt.Type.Class = event.StateEventType
	}
	return evt
}

// optInt returns an integer field, 0 for a null one, and false for any
// other type or a number that is no int64.
func optInt(r gjson.Result) (int64, bool) {
	switch r.Type {
	case gjson.Number:
		n, err := strconv.ParseInt(r.Raw, 10, 64)
		return n, err == nil
	case gjson.Null:
		return 0, true
	}
	return 0, false
}
