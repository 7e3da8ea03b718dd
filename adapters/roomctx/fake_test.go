package roomctx

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages/roompb"
)

const (
	testRoom  = id.RoomID("!room:hs")
	otherRoom = id.RoomID("!other:hs")
	testBot   = "@lisa:hs"
	baseTS    = int64(1785000000000) // 2026-07-25T17:20:00Z
)

// fakeFetcher serves canned homeserver answers and records requests.
type fakeFetcher struct {
	resp       *mautrix.RespContext
	ctxErr     error
	events     map[id.EventID]*event.Event // GetEvent answers
	members    map[id.UserID]string
	membersErr error

	// GET /relations pages by from token ("" is the first), and an
	// error for the tokens in relErr.
	relations map[string]*mautrix.RespGetRelations
	relErr    map[string]error
	// GET /messages pages by from token, and an error for the tokens in
	// msgErr.
	pages  map[string]*mautrix.RespMessages
	msgErr map[string]error
	// state holds state event contents (JSON) by type.
	state map[event.Type]string

	mu       sync.Mutex
	gets     []id.EventID
	limit    int
	filter   *mautrix.FilterPart
	asked    id.EventID
	room     id.RoomID
	relReqs  []mautrix.ReqGetRelations
	relRoots []id.EventID
	msgReqs  []msgReq
}

// msgReq is one recorded GET /messages.
type msgReq struct {
	from  string
	dir   mautrix.Direction
	limit int
}

func (f *fakeFetcher) Context(_ context.Context, room id.RoomID, evt id.EventID, filter *mautrix.FilterPart, limit int) (*mautrix.RespContext, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.room, f.asked, f.filter, f.limit = room, evt, filter, limit
	return f.resp, f.ctxErr
}

func (f *fakeFetcher) GetEvent(_ context.Context, room id.RoomID, evt id.EventID) (*event.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets = append(f.gets, evt)
	if e, ok := f.events[evt]; ok && room == testRoom {
		return e, nil
	}
	return nil, notFound()
}

func (f *fakeFetcher) JoinedMembers(context.Context, id.RoomID) (*mautrix.RespJoinedMembers, error) {
	if f.membersErr != nil {
		return nil, f.membersErr
	}
	resp := &mautrix.RespJoinedMembers{Joined: map[id.UserID]mautrix.JoinedMember{}}
	for u, n := range f.members {
		resp.Joined[u] = mautrix.JoinedMember{DisplayName: n}
	}
	return resp, nil
}

func (f *fakeFetcher) GetRelations(_ context.Context, room id.RoomID, root id.EventID, req *mautrix.ReqGetRelations) (*mautrix.RespGetRelations, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.relReqs = append(f.relReqs, *req)
	f.relRoots = append(f.relRoots, root)
	if err := f.relErr[req.From]; err != nil {
		return nil, err
	}
	if resp, ok := f.relations[req.From]; ok && room == testRoom {
		return resp, nil
	}
	return &mautrix.RespGetRelations{}, nil
}

func (f *fakeFetcher) Messages(_ context.Context, room id.RoomID, from, _ string, dir mautrix.Direction, _ *mautrix.FilterPart, limit int) (*mautrix.RespMessages, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgReqs = append(f.msgReqs, msgReq{from: from, dir: dir, limit: limit})
	if err := f.msgErr[from]; err != nil {
		return nil, err
	}
	if resp, ok := f.pages[from]; ok && room == testRoom {
		return resp, nil
	}
	return &mautrix.RespMessages{Start: from}, nil
}

func (f *fakeFetcher) StateEvent(_ context.Context, room id.RoomID, typ event.Type, key string, out any) error {
	raw, ok := f.state[typ]
	if !ok || room != testRoom || key != "" {
		return notFound()
	}
	return json.Unmarshal([]byte(raw), out)
}

// baseOnly hides the optional capabilities of a fetcher.
type baseOnly struct{ Fetcher }

var (
	_ Fetcher        = (*mautrix.Client)(nil)
	_ ThreadFetcher  = (*mautrix.Client)(nil)
	_ HistoryFetcher = (*mautrix.Client)(nil)
	_ StateFetcher   = (*mautrix.Client)(nil)
	_ ThreadFetcher  = (*fakeFetcher)(nil)
	_ HistoryFetcher = (*fakeFetcher)(nil)
	_ StateFetcher   = (*fakeFetcher)(nil)
)

// notFound is the error mautrix returns for a 404.
func notFound() error {
	return mautrix.HTTPError{
		Response:  &http.Response{StatusCode: http.StatusNotFound},
		RespError: &mautrix.RespError{ErrCode: "M_NOT_FOUND", Err: "Event not found", StatusCode: 404},
	}
}

// ev decodes an event as the homeserver would send it: seq numbers the
// event ID ($e<seq>) and its timestamp (a minute apart).
func ev(t testing.TB, seq int, sender, content string, mods ...func(map[string]any)) *event.Event {
	t.Helper()
	m := map[string]any{
		"event_id":         fmt.Sprintf("$e%d", seq),
		"room_id":          string(testRoom),
		"sender":           sender,
		"type":             "m.room.message",
		"origin_server_ts": baseTS + int64(seq)*60_000,
		"content":          json.RawMessage(content),
	}
	for _, f := range mods {
		f(m)
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var e event.Event
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	return &e
}

// set returns a modifier that sets a top-level event field.
func set(key string, v any) func(map[string]any) {
	return func(m map[string]any) {
		if v == nil {
			delete(m, key)
		} else {
			m[key] = v
		}
	}
}

// txt is the content of a plain text message.
func txt(body string) string {
	b, _ := json.Marshal(map[string]any{"msgtype": "m.text", "body": body})
	return string(b)
}

// replyTxt is the content of a plain reply to target.
func replyTxt(body, target string) string {
	b, _ := json.Marshal(map[string]any{
		"msgtype":      "m.text",
		"body":         body,
		"m.relates_to": map[string]any{"m.in_reply_to": map[string]any{"event_id": target}},
	})
	return string(b)
}

// editTxt is the content of an edit of target.
func editTxt(body, target string) string {
	b, _ := json.Marshal(map[string]any{
		"msgtype":       "m.text",
		"body":          "* " + body,
		"m.new_content": map[string]any{"msgtype": "m.text", "body": body},
		"m.relates_to":  map[string]any{"rel_type": "m.replace", "event_id": target},
	})
	return string(b)
}

// before returns events oldest first as GET /context sends them: newest
// first.
func before(evs ...*event.Event) []*event.Event {
	out := make([]*event.Event, len(evs))
	for i, e := range evs {
		out[len(evs)-1-i] = e
	}
	return out
}

// invocation is the candidate for "$inv" by bob, replying to replyTo.
func invocation(body, replyTo string) *roompb.Candidate {
	return &roompb.Candidate{
		RoomId:         string(testRoom),
		EventId:        "$inv",
		Sender:         "@bob:hs",
		OriginTsMs:     baseTS + 100*60_000,
		Trigger:        "mention",
		Body:           body,
		ReplyToEventId: replyTo,
	}
}

// testLimits are roomy limits for the fake tests.
func testLimits() Limits {
	return Limits{MaxEvents: 40, MaxCharacters: 24000, MaxEventCharacters: 4000, MaxReplyDepth: 2}
}

// people are the display names the fake JoinedMembers returns.
func people() map[id.UserID]string {
	return map[id.UserID]string{"@alice:hs": "Alice", "@bob:hs": "Bob", testBot: "Lisa"}
}

// build runs a Builder over f and checks the block is well-formed.
func build(t *testing.T, f *fakeFetcher, limits Limits, c *roompb.Candidate) string {
	t.Helper()
	out, err := New(f, testBot, limits).Build(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	checkWellFormed(t, out)
	return out
}

// newMsg is message content with an optional HTML body.
func newMsg(body, formatted string) *event.MessageEventContent {
	m := &event.MessageEventContent{MsgType: event.MsgText, Body: body}
	if formatted != "" {
		m.Format, m.FormattedBody = event.FormatHTML, formatted
	}
	return m
}

// eventID converts a string to an event ID.
func eventID(s string) id.EventID { return id.EventID(s) }
