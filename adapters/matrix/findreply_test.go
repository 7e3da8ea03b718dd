package matrix

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/testkit/dendrite"
)

// countingTransport counts /messages requests by direction.
type countingTransport struct {
	mu         sync.Mutex
	back, fwd  int
	underlying http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/messages") {
		c.mu.Lock()
		if r.URL.Query().Get("dir") == "b" {
			c.back++
		} else {
			c.fwd++
		}
		c.mu.Unlock()
	}
	return c.underlying.RoundTrip(r)
}

func (c *countingTransport) reset() (back, fwd int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	back, fwd = c.back, c.fwd
	c.back, c.fwd = 0, 0
	return back, fwd
}

// TestFindReplyAmongManyReplies: against a real Dendrite, a reply that
// comes after many of Lisa's other messages is found, and found on the
// first backward page; an unanswered event is not found; a reply naming an
// event the homeserver does not know is found by Lisa's marker.
func TestFindReplyAmongManyReplies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hs := dendrite.Start(t, dendrite.Options{})
	bot, err := hs.RegisterUser(ctx, "lisa", "lisa-password-1", "LISADEV")
	if err != nil {
		t.Fatal(err)
	}
	human, err := hs.RegisterUser(ctx, "human", "human-password-1", "HUMANDEV")
	if err != nil {
		t.Fatal(err)
	}
	ct := &countingTransport{underlying: http.DefaultTransport}
	c, err := Connect(ctx, hs.URL(), bot.UserID, bot.DeviceID, bot.AccessToken, &http.Client{Transport: ct})
	if err != nil {
		t.Fatal(err)
	}
	hc, _ := mautrix.NewClient(hs.URL(), id.UserID(human.UserID), human.AccessToken)
	room, err := hc.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{id.UserID(bot.UserID)}})
	if err != nil {
		t.Fatal(err)
	}
	bc, _ := mautrix.NewClient(hs.URL(), id.UserID(bot.UserID), bot.AccessToken)
	if _, err := bc.JoinRoomByID(ctx, room.RoomID); err != nil {
		t.Fatal(err)
	}
	post := func(body string) id.EventID {
		resp, err := hc.SendText(ctx, room.RoomID, body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.EventID
	}
	reply := func(to id.EventID, txn string) string {
		content := fmt.Sprintf(`{"msgtype":"m.text","body":"re %s","m.relates_to":{"m.in_reply_to":{"event_id":%q}}}`, to, to)
		got, err := c.SendReply(ctx, string(room.RoomID), txn, []byte(content))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// Lisa has answered plenty before the invocation...
	for i := range 5 {
		reply(post(fmt.Sprintf("earlier %d", i)), fmt.Sprintf("lisa_early_%d", i))
	}
	invoking := post("the invocation")
	unanswered := post("never answered")
	// ...and more after it, before her reply to it: more than one
	// /context window's worth.
	for i := range 14 {
		reply(post(fmt.Sprintf("later %d", i)), fmt.Sprintf("lisa_late_%d", i))
	}
	want := reply(invoking, "lisa_the_reply")
	_ = post("after the reply")

	ct.reset()
	awaitReply(ctx, t, c, string(room.RoomID), string(invoking), "", want)
	if back, _ := ct.reset(); back != 1 {
		t.Errorf("found the newest reply with %d page reads, want 1", back)
	}
	if _, found, err := c.FindReply(ctx, string(room.RoomID), string(unanswered), "lisa_nope"); err != nil || found {
		t.Fatalf("unanswered event: found=%v err=%v", found, err)
	}
	if back, fwd := ct.reset(); back == 0 || fwd != 0 {
		t.Errorf("not-found lookup read %d pages backwards and %d forwards, want some and 0", back, fwd)
	}
	// An event the homeserver does not know: a reply naming it (Lisa's
	// marker) is found.
	marker := `{"msgtype":"m.text","body":"x","org.lisabot.invocation":"$gone:elsewhere"}`
	ghost, err := c.SendReply(ctx, string(room.RoomID), "lisa_ghost", []byte(marker))
	if err != nil {
		t.Fatal(err)
	}
	ct.reset()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, found, err := c.FindReply(ctx, string(room.RoomID), "$gone:elsewhere", "")
		if err != nil {
			t.Fatal(err)
		}
		if found && got == ghost {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reply to an unknown event not found (%s %v)", got, found)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFindReactions: against a real Dendrite, Lisa's reaction with a key
// on an event is found (not her other keys, not another event's, not a
// member's), and one she redacted is not.
func TestFindReactions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hs := dendrite.Start(t, dendrite.Options{})
	bot, err := hs.RegisterUser(ctx, "lisa", "lisa-password-1", "LISADEV")
	if err != nil {
		t.Fatal(err)
	}
	human, err := hs.RegisterUser(ctx, "human", "human-password-1", "HUMANDEV")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Connect(ctx, hs.URL(), bot.UserID, bot.DeviceID, bot.AccessToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	hc, _ := mautrix.NewClient(hs.URL(), id.UserID(human.UserID), human.AccessToken)
	room, err := hc.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{id.UserID(bot.UserID)}})
	if err != nil {
		t.Fatal(err)
	}
	bc, _ := mautrix.NewClient(hs.URL(), id.UserID(bot.UserID), bot.AccessToken)
	if _, err := bc.JoinRoomByID(ctx, room.RoomID); err != nil {
		t.Fatal(err)
	}
	r := string(room.RoomID)
	post := func(body string) string {
		resp, err := hc.SendText(ctx, room.RoomID, body)
		if err != nil {
			t.Fatal(err)
		}
		return string(resp.EventID)
	}
	react := func(ev, key, txn string) string {
		got, err := c.React(ctx, r, ev, key, txn)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	q1, q2, q3 := post("one"), post("two"), post("three")
	want := react(q1, "⏳", "lisa_w1")
	react(q1, "👍", "lisa_t1")
	react(q2, "⏳", "lisa_w2")
	if _, err := hc.SendReaction(ctx, room.RoomID, id.EventID(q3), "⏳"); err != nil {
		t.Fatal(err)
	}
	gone := react(q3, "⏳", "lisa_w3")
	if err := c.Redact(ctx, r, gone, "lisa_w3_redact"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := c.FindReactions(ctx, r, q1, "⏳")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 && got[0] == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("FindReactions(q1) = %v, want [%s]", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got, err := c.FindReactions(ctx, r, q3, "⏳"); err != nil || len(got) != 0 {
		t.Fatalf("FindReactions(q3) = %v, %v; want none (a member's, and Lisa's redacted one)", got, err)
	}
	if got, err := c.FindReactions(ctx, r, "$nothing", "⏳"); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("FindReactions of an event without reactions = %#v, %v", got, err)
	}
}
