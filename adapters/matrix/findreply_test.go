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

	"github.com/lisabot/lisa/testkit/homeserver"
)

// countingTransport counts /messages requests by direction, and GET
// /event requests.
type countingTransport struct {
	mu               sync.Mutex
	back, fwd, event int
	underlying       http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	switch {
	case strings.HasSuffix(r.URL.Path, "/messages") && r.URL.Query().Get("dir") == "b":
		c.back++
	case strings.HasSuffix(r.URL.Path, "/messages"):
		c.fwd++
	case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/event/"):
		c.event++
	}
	c.mu.Unlock()
	return c.underlying.RoundTrip(r)
}

func (c *countingTransport) reset() (back, fwd int) {
	back, fwd, _ = c.resetAll()
	return back, fwd
}

func (c *countingTransport) resetAll() (back, fwd, event int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	back, fwd, event = c.back, c.fwd, c.event
	c.back, c.fwd, c.event = 0, 0, 0
	return back, fwd, event
}

// TestFindReplyAmongManyReplies: against each real homeserver, a reply that
// comes after many of Lisa's other messages is found, and found on the
// first backward page; an unanswered event is not found; a reply naming an
// event the homeserver does not know is found by Lisa's marker.
func TestFindReplyAmongManyReplies(t *testing.T) {
	t.Parallel() // its own servers; at most -parallel at once
	homeserver.Each(t, testFindReplyAmongManyReplies)
}

// testFindReplyAmongManyReplies is TestFindReplyAmongManyReplies on one homeserver.
func testFindReplyAmongManyReplies(t *testing.T, hs homeserver.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
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

// TestFindReactions: against each real homeserver, Lisa's reaction with a key
// on an event is found (not her other keys, not another event's, not a
// member's), and one she redacted is not.
func TestFindReactions(t *testing.T) {
	t.Parallel() // its own servers; at most -parallel at once
	homeserver.Each(t, testFindReactions)
}

// testFindReactions is TestFindReactions on one homeserver.
func testFindReactions(t *testing.T, hs homeserver.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
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

// TestScansStopAtTheQuestion: against each real homeserver, FindReplyToRedact
// and FindReactions read no further back than the question (a reply or a
// reaction of Lisa's always comes after it): with more than a page of
// Lisa's messages and reactions older than a question, a lookup that
// finds nothing, or finds the one reaction, reads one page and the
// question's timestamp — also when the question is redacted. A lookup
// that finds its reply on the first page reads nothing more. FindReply,
// the check before a reply is sent again, never stops on timestamps: it
// reads every page there is.
func TestScansStopAtTheQuestion(t *testing.T) {
	t.Parallel() // its own servers; at most -parallel at once
	homeserver.Each(t, testScansStopAtTheQuestion)
}

// testScansStopAtTheQuestion is TestScansStopAtTheQuestion on one homeserver.
func testScansStopAtTheQuestion(t *testing.T, hs homeserver.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
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
	// Here Lisa's older events are seconds older than the question, not
	// the hour clockSkew allows for another homeserver's clock.
	c.skew = 0
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
	old := post("an old question")
	const older = 110 // more than one page of 100
	for i := range older {
		if _, err := c.SendReply(ctx, r, fmt.Sprintf("lisa_old_%d", i), []byte(fmt.Sprintf(`{"msgtype":"m.text","body":"old %d"}`, i))); err != nil {
			t.Fatal(err)
		}
		if _, err := c.React(ctx, r, old, fmt.Sprintf("k%d", i), fmt.Sprintf("lisa_oldr_%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	q := post("the question")
	want, err := c.React(ctx, r, q, "⏳", "lisa_wait_q")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hc.RedactEvent(ctx, room.RoomID, id.EventID(q)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := c.FindReactions(ctx, r, q, "⏳")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 && got[0] == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("FindReactions(q) = %v, want [%s]", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}

	ct.resetAll()
	if got, err := c.FindReactions(ctx, r, q, "⏳"); err != nil || len(got) != 1 || got[0] != want {
		t.Fatalf("FindReactions(q) = %v, %v; want [%s]", got, err, want)
	}
	if back, _, ev := ct.resetAll(); back != 1 || ev != 1 {
		t.Errorf("FindReactions read %d pages and %d events, want 1 and 1 (the question's timestamp)", back, ev)
	}
	if _, found, err := c.FindReplyToRedact(ctx, r, q, "lisa_no_such_txn"); err != nil || found {
		t.Fatalf("FindReplyToRedact(q): found=%v err=%v", found, err)
	}
	if back, _, ev := ct.resetAll(); back != 1 || ev != 1 {
		t.Errorf("FindReplyToRedact (a miss) read %d pages and %d events, want 1 and 1", back, ev)
	}
	if _, found, err := c.FindReply(ctx, r, q, "lisa_no_such_txn"); err != nil || found {
		t.Fatalf("FindReply(q): found=%v err=%v", found, err)
	}
	if back, _, ev := ct.resetAll(); back < 2 || ev != 0 {
		t.Errorf("FindReply (a miss, before a resend) read %d pages and %d events, want every page (2 or more) and no timestamp", back, ev)
	}
	// The old question's reactions are all found: the scan goes back to
	// it (older pages are read while Lisa's events are younger than it).
	if got, err := c.FindReactions(ctx, r, old, "k0"); err != nil || len(got) != 1 {
		t.Fatalf("FindReactions(old, k0) = %v, %v; want one", got, err)
	}
	if back, _, _ := ct.resetAll(); back < 2 {
		t.Errorf("FindReactions(old) read %d pages, want at least 2", back)
	}
	// A reply on the first page: no further read, no timestamp.
	reply, err := c.SendReply(ctx, r, "lisa_reply_q", []byte(fmt.Sprintf(`{"msgtype":"m.text","body":"re","org.lisabot.invocation":%q}`, q)))
	if err != nil {
		t.Fatal(err)
	}
	awaitReply(ctx, t, c, r, q, "", reply)
	ct.resetAll()
	if got, found, err := c.FindReplyToRedact(ctx, r, q, ""); err != nil || !found || got != reply {
		t.Fatalf("FindReplyToRedact(q) = %s, %v, %v; want %s", got, found, err, reply)
	}
	if back, _, ev := ct.resetAll(); back != 1 || ev != 0 {
		t.Errorf("a reply on the first page: %d pages and %d events read, want 1 and 0", back, ev)
	}
}
