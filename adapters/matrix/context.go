package matrix

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// wireContext is the part of a GET /context response that the context
// builder reads: the events before the anchor and the member state. The
// anchor and the events after it are not decoded at all.
type wireContext struct {
	Start        string            `json:"start"`
	End          string            `json:"end"`
	EventsBefore []json.RawMessage `json:"events_before"`
	State        []json.RawMessage `json:"state"`
}

// wireEvent is the envelope of one event with its content left raw.
// mautrix decodes every content into a map of interfaces and parses each
// event three times over; on a lived-in room's context that was most of
// the CPU an invocation spends before the LLM call.
type wireEvent struct {
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

// parseContext decodes a GET /context response body. Well-formed
// responses are decoded in one pass; if any event is malformed, each
// event is decoded on its own and the malformed ones are left out.
func parseContext(body []byte) (*mautrix.RespContext, error) {
	if resp, ok := parseContextFast(body); ok {
		return resp, nil
	}
	var wire wireContext
	if err := json.Unmarshal(body, &wire); err != nil {
		return nil, fmt.Errorf("matrix: undecodable GET /context response: %w", err)
	}
	return decodeContext(&wire), nil
}

// parseContextFast decodes a well-formed response in one pass; ok is false
// if any part of it does not decode.
func parseContextFast(body []byte) (*mautrix.RespContext, bool) {
	var fast struct {
		Start        string      `json:"start"`
		End          string      `json:"end"`
		EventsBefore []wireEvent `json:"events_before"`
		State        []wireEvent `json:"state"`
	}
	if json.Unmarshal(body, &fast) == nil {
		resp := &mautrix.RespContext{Start: fast.Start, End: fast.End, EventsBefore: make([]*event.Event, 0, len(fast.EventsBefore))}
		for i := range fast.EventsBefore {
			resp.EventsBefore = append(resp.EventsBefore, fast.EventsBefore[i].event())
		}
		for i := range fast.State {
			if evt := memberEvent(fast.State[i].event()); evt != nil {
				resp.State = append(resp.State, evt)
			}
		}
		return resp, true
	}
	return nil, false
}

// decodeContext turns the raw response into mautrix's shape.
func decodeContext(w *wireContext) *mautrix.RespContext {
	resp := &mautrix.RespContext{
		Start:        w.Start,
		End:          w.End,
		EventsBefore: make([]*event.Event, 0, len(w.EventsBefore)),
	}
	for _, raw := range w.EventsBefore {
		if evt := decodeEvent(raw); evt != nil {
			resp.EventsBefore = append(resp.EventsBefore, evt)
		}
	}
	for _, raw := range w.State {
		if evt := memberEvent(decodeEvent(raw)); evt != nil {
			resp.State = append(resp.State, evt)
		}
	}
	return resp
}

// memberEvent returns evt with its member content parsed, or nil if evt
// is no member event.
func memberEvent(evt *event.Event) *event.Event {
	if evt == nil || evt.Type.Type != event.StateMember.Type {
		return nil
	}
	// Only the display name is read: a badly typed field elsewhere in the
	// content must not cost the name (mautrix kept every field in a map).
	var m struct {
		Displayname string `json:"displayname"`
	}
	if json.Unmarshal(evt.Content.VeryRaw, &m) == nil {
		evt.Content.Parsed = &event.MemberEventContent{Displayname: m.Displayname}
	}
	return evt
}

// decodeEvent decodes one event's envelope, or returns nil if it is not
// an event object.
func decodeEvent(raw json.RawMessage) *event.Event {
	var w wireEvent
	if json.Unmarshal(raw, &w) != nil {
		return nil
	}
	return w.event()
}

// event converts the envelope into mautrix's shape.
func (w *wireEvent) event() *event.Event {
	evt := &event.Event{
		ID:        w.ID,
		Type:      event.NewEventType(w.Type),
		Sender:    w.Sender,
		RoomID:    w.RoomID,
		StateKey:  w.StateKey,
		Timestamp: w.Timestamp,
		Content:   event.Content{VeryRaw: w.Content},
	}
	if w.StateKey != nil {
		evt.Type.Class = event.StateEventType
	}
	if rb := bytes.TrimSpace(w.Unsigned.RedactedBecause); len(rb) > 0 && !bytes.Equal(rb, []byte("null")) {
		evt.Unsigned.RedactedBecause = &event.Event{}
	}
	return evt
}
