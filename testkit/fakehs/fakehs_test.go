package fakehs_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/testkit/fakehs"
)

const (
	bot   = "@lisa:fake.test"
	human = "@ann:fake.test"
	room  = "!r1:fake.test"
)

func start(t *testing.T, onSend func(fakehs.Send)) (*fakehs.Server, *mautrix.Client) {
	t.Helper()
	s := fakehs.New(fakehs.Options{UserID: bot, DeviceID: "DEV", Token: "tok", OnSend: onSend})
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	s.CreateRoom(room, map[string]string{human: "Ann"})
	cli, err := mautrix.NewClient(s.URL(), bot, "tok")
	if err != nil {
		t.Fatal(err)
	}
	return s, cli
}

func TestWhoamiAndAuth(t *testing.T) {
	s, cli := start(t, nil)
	ctx := context.Background()
	who, err := cli.Whoami(ctx)
	if err != nil || who.UserID != bot || who.DeviceID != "DEV" {
		t.Fatalf("whoami = %+v, %v", who, err)
	}
	bad, _ := mautrix.NewClient(s.URL(), bot, "wrong")
	if _, err := bad.Whoami(ctx); err == nil {
		t.Fatal("a wrong token was accepted")
	}
}

func TestSyncLongPollAndLimited(t *testing.T) {
	s, cli := start(t, nil)
	ctx := context.Background()
	for range 3 {
		if _, _, err := s.Post(room, human, map[string]any{"msgtype": "m.text", "body": "old"}); err != nil {
			t.Fatal(err)
		}
	}
	filter := `{"room":{"timeline":{"limit":2,"types":["m.room.message"]}}}`
	base, err := cli.FullSyncRequest(ctx, mautrix.ReqSync{FilterID: filter})
	if err != nil {
		t.Fatal(err)
	}
	tl := base.Rooms.Join[id.RoomID(room)].Timeline
	if len(tl.Events) != 2 || !tl.Limited || tl.PrevBatch == "" {
		t.Fatalf("baseline timeline = %d events limited=%v prev=%q", len(tl.Events), tl.Limited, tl.PrevBatch)
	}
	// prev_batch leads to the older event.
	msgs, err := cli.Messages(ctx, id.RoomID(room), tl.PrevBatch, "", mautrix.DirectionBackward, nil, 10)
	if err != nil || len(msgs.Chunk) != 1 {
		t.Fatalf("messages from prev_batch = %+v, %v", msgs, err)
	}
	var wg sync.WaitGroup
	var got *mautrix.RespSync
	var syncErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		got, syncErr = cli.FullSyncRequest(ctx, mautrix.ReqSync{FilterID: filter, Since: base.NextBatch, Timeout: 10_000})
	}()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.WaitParked(wctx); err != nil {
		t.Fatal(err)
	}
	evID, _, err := s.Post(room, human, map[string]any{"msgtype": "m.text", "body": "new"})
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if syncErr != nil {
		t.Fatal(syncErr)
	}
	evs := got.Rooms.Join[id.RoomID(room)].Timeline.Events
	if len(evs) != 1 || string(evs[0].ID) != evID || got.NextBatch == base.NextBatch {
		t.Fatalf("long-poll returned %+v", got)
	}
	// A timeout with nothing new returns an empty response.
	empty, err := cli.FullSyncRequest(ctx, mautrix.ReqSync{FilterID: filter, Since: got.NextBatch, Timeout: 10})
	if err != nil || len(empty.Rooms.Join) != 0 || empty.NextBatch != got.NextBatch {
		t.Fatalf("empty sync = %+v, %v", empty, err)
	}
	if s.Head() != got.NextBatch {
		t.Errorf("head %s, next_batch %s", s.Head(), got.NextBatch)
	}
	if _, err := cli.FullSyncRequest(ctx, mautrix.ReqSync{FilterID: filter, Since: "s999"}); err == nil {
		t.Fatal("an unknown since token was accepted")
	}
}

func TestSendIsIdempotentPerTxnAndSeenInSync(t *testing.T) {
	var sends []fakehs.Send
	var mu sync.Mutex
	s, cli := start(t, func(x fakehs.Send) { mu.Lock(); sends = append(sends, x); mu.Unlock() })
	ctx := context.Background()
	base, err := cli.FullSyncRequest(ctx, mautrix.ReqSync{})
	if err != nil {
		t.Fatal(err)
	}
	content := json.RawMessage(`{"msgtype":"m.text","body":"hi"}`)
	r1, err := cli.SendMessageEvent(ctx, room, event.EventMessage, content, mautrix.ReqSendEvent{TransactionID: "txn1"})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := cli.SendMessageEvent(ctx, room, event.EventMessage, content, mautrix.ReqSendEvent{TransactionID: "txn1"})
	if err != nil || r2.EventID != r1.EventID {
		t.Fatalf("repeat send = %v, %v; want %s", r2, err, r1.EventID)
	}
	if len(sends) != 1 || sends[0].TxnID != "txn1" || sends[0].At.IsZero() {
		t.Fatalf("sends = %+v", sends)
	}
	if n := len(s.Events(room)); n != 1 {
		t.Fatalf("room has %d events", n)
	}
	next, err := cli.FullSyncRequest(ctx, mautrix.ReqSync{Since: base.NextBatch})
	if err != nil {
		t.Fatal(err)
	}
	evs := next.Rooms.Join[id.RoomID(room)].Timeline.Events
	if len(evs) != 1 || evs[0].Unsigned.TransactionID != "txn1" || evs[0].Sender != bot {
		t.Fatalf("own event in sync = %+v", evs)
	}
	if _, err := cli.SendMessageEvent(ctx, "!nope:fake.test", event.EventMessage, content); err == nil {
		t.Fatal("send to an unknown room succeeded")
	}
}

func TestEventContextMembersTyping(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	s := fakehs.New(fakehs.Options{UserID: bot, DeviceID: "DEV", Token: "tok", OnRequest: func(endpoint, r string, at time.Time) {
		mu.Lock()
		defer mu.Unlock()
		if r == room && !at.IsZero() {
			seen[endpoint]++
		}
	}})
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	s.CreateRoom(room, map[string]string{human: "Ann"})
	cli, err := mautrix.NewClient(s.URL(), bot, "tok")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ids []string
	for _, body := range []string{"one", "two", "three", "four"} {
		e, _, err := s.Post(room, human, map[string]any{"msgtype": "m.text", "body": body})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e)
	}
	ev, err := cli.GetEvent(ctx, room, id.EventID(ids[1]))
	if err != nil || ev.Sender != human || ev.RoomID != room {
		t.Fatalf("event = %+v, %v", ev, err)
	}
	if _, err := cli.GetEvent(ctx, room, "$missing"); err == nil {
		t.Fatal("a missing event was found")
	}
	c, err := cli.Context(ctx, room, id.EventID(ids[2]), nil, 4)
	if err != nil {
		t.Fatal(err)
	}
	if c.Event.ID != id.EventID(ids[2]) || len(c.EventsBefore) != 2 || c.EventsBefore[0].ID != id.EventID(ids[1]) || len(c.EventsAfter) != 1 {
		t.Fatalf("context = before %d after %d", len(c.EventsBefore), len(c.EventsAfter))
	}
	m, err := cli.JoinedMembers(ctx, room)
	if err != nil || m.Joined[human].DisplayName != "Ann" {
		t.Fatalf("members = %+v, %v", m, err)
	}
	if _, err := cli.UserTyping(ctx, room, true, time.Second); err != nil {
		t.Fatal(err)
	}
	if got := s.Counts(); got["typing"] != 1 || got["context"] != 1 || got["joined_members"] != 1 {
		t.Fatalf("counts = %v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["typing"] != 1 || seen["context"] != 1 || seen["joined_members"] != 1 || seen["event"] != 2 {
		t.Fatalf("OnRequest saw %v", seen)
	}
}

// TestAnswerEvent: a scripted GET /event answer replaces the event for the
// number of requests asked, JSON or not, and then the event is served
// again; other events are not affected.
func TestAnswerEvent(t *testing.T) {
	s, cli := start(t, nil)
	ctx := context.Background()
	ev, _, err := s.Post(room, human, map[string]any{"msgtype": "m.text", "body": "hi"})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := s.Post(room, human, map[string]any{"msgtype": "m.text", "body": "there"})
	if err != nil {
		t.Fatal(err)
	}
	status := func(err error) int {
		t.Helper()
		var herr mautrix.HTTPError
		if !errors.As(err, &herr) || herr.Response == nil {
			t.Fatalf("error %v is not an HTTP error", err)
		}
		return herr.Response.StatusCode
	}
	s.AnswerEvent(ev, 400, `{"errcode":"M_INVALID_PARAM","error":"bad event ID"}`, 1)
	_, err = cli.GetEvent(ctx, room, id.EventID(ev))
	if status(err) != 400 || !errors.Is(err, mautrix.MInvalidParam) {
		t.Fatalf("scripted JSON answer: %v", err)
	}
	if got, err := cli.GetEvent(ctx, room, id.EventID(ev)); err != nil || string(got.ID) != ev {
		t.Fatalf("after the script ran out: %v, %v", got, err)
	}
	s.AnswerEvent(ev, 414, `<html>URI Too Long</html>`, -1)
	for range 3 {
		if _, err := cli.GetEvent(ctx, room, id.EventID(ev)); status(err) != 414 {
			t.Fatalf("scripted HTML answer: %v", err)
		}
	}
	if got, err := cli.GetEvent(ctx, room, id.EventID(other)); err != nil || string(got.ID) != other {
		t.Fatalf("another event: %v, %v", got, err)
	}
	s.AnswerEvent(ev, 0, "", 0)
	if _, err := cli.GetEvent(ctx, room, id.EventID(ev)); err != nil {
		t.Fatalf("after removing the script: %v", err)
	}
	if got := s.Counts()["event"]; got != 7 {
		t.Fatalf("%d GET /event requests counted, want 7", got)
	}
}
