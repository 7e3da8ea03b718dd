package matrix

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/testkit/homeserver"
)

type emptyLedger struct{ asked int }

func (l *emptyLedger) IsBotEvent(string, string) (bool, error) { l.asked++; return false, nil }
func (l *emptyLedger) Routed(string, string) (bool, error)     { return false, nil }

// TestSourceAgainstHomeservers: on each real homeserver, a baseline answers nothing; afterwards a reply
// to a Lisa event the ledger does not know is verified with GET /event, a
// reply to a human is not an invocation, an edit that adds a mention to
// chatter is rejected as an edit, a redaction of chatter is not routed,
// Lisa's own events are reported, and
// rooms outside the allowlist are dropped locally.
func TestSourceAgainstHomeservers(t *testing.T) {
	t.Parallel() // its own servers; at most -parallel at once
	homeserver.Each(t, testSourceAgainstHomeservers)
}

// testSourceAgainstHomeservers is TestSourceAgainstHomeservers on one homeserver.
func testSourceAgainstHomeservers(t *testing.T, hs homeserver.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bot, _ := hs.RegisterUser(ctx, "lisa", "lisa-password-1", "LISADEV")
	humanAcc, _ := hs.RegisterUser(ctx, "human", "human-password-1", "HUMANDEV")
	human, _ := mautrix.NewClient(hs.URL(), id.UserID(humanAcc.UserID), humanAcc.AccessToken)
	botCli, _ := mautrix.NewClient(hs.URL(), id.UserID(bot.UserID), bot.AccessToken)
	var rooms []id.RoomID
	for range 2 {
		r, err := human.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{id.UserID(bot.UserID)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := botCli.JoinRoomByID(ctx, r.RoomID); err != nil {
			t.Fatal(err)
		}
		rooms = append(rooms, r.RoomID)
	}
	allowed, forbidden := rooms[0], rooms[1]
	c, err := Connect(ctx, hs.URL(), bot.UserID, bot.DeviceID, bot.AccessToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	ledger := &emptyLedger{}
	src := NewSource(c, SyncOptions{Timeout: 500 * time.Millisecond, TimelineLimit: 20, GapPageLimit: 3, Aliases: []string{"Lisa"}, AllowedRooms: []string{string(allowed)}},
		ledger, slog.New(slog.DiscardHandler), time.Now)

	send := func(cli *mautrix.Client, room id.RoomID, content *event.MessageEventContent) id.EventID {
		t.Helper()
		resp, err := cli.SendMessageEvent(ctx, room, event.EventMessage, content)
		if err != nil {
			t.Fatal(err)
		}
		return resp.EventID
	}
	send(human, allowed, &event.MessageEventContent{MsgType: event.MsgText, Body: "Lisa, old history"})
	// The sync stream can lag a send by a moment (Dendrite's does): take baselines
	// until the history message is inside one, as it is in real life when
	// the message predates Lisa's first start.
	var base *messages.SyncBatch
	for deadline := time.Now().Add(10 * time.Second); ; {
		if base, err = src.Next(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if base.Rejected["baseline"] > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(base.Candidates) != 0 || !base.Cursor.GetBaselineDone() || base.Cursor.GetNextBatch() == "" {
		t.Fatalf("baseline = %+v", base)
	}

	lisaEvent, err := c.SendReply(ctx, string(allowed), "lisa_src_1", []byte(`{"msgtype":"m.text","body":"I am Lisa"}`))
	if err != nil {
		t.Fatal(err)
	}
	humanEvent := send(human, allowed, &event.MessageEventContent{MsgType: event.MsgText, Body: "unrelated"})
	replyToLisa := send(human, allowed, &event.MessageEventContent{MsgType: event.MsgText, Body: "tell me more",
		RelatesTo: &event.RelatesTo{InReplyTo: &event.InReplyTo{EventID: id.EventID(lisaEvent)}}})
	send(human, allowed, &event.MessageEventContent{MsgType: event.MsgText, Body: "me too",
		RelatesTo: &event.RelatesTo{InReplyTo: &event.InReplyTo{EventID: humanEvent}}})
	send(human, forbidden, &event.MessageEventContent{MsgType: event.MsgText, Body: "Lisa? over here"})
	// An edit that adds a mention to chatter is no invocation (an edit
	// never is): it is counted under its outcome, "edit".
	send(human, allowed, &event.MessageEventContent{MsgType: event.MsgText, Body: "* Lisa, now?",
		Mentions:   &event.Mentions{UserIDs: []id.UserID{id.UserID(bot.UserID)}},
		NewContent: &event.MessageEventContent{MsgType: event.MsgText, Body: "Lisa, now?", Mentions: &event.Mentions{UserIDs: []id.UserID{id.UserID(bot.UserID)}}},
		RelatesTo:  &event.RelatesTo{Type: event.RelReplace, EventID: humanEvent}})
	// A redaction of chatter is nothing to the room: it never sees it.
	withdrawn := send(human, allowed, &event.MessageEventContent{MsgType: event.MsgText, Body: "oops, wrong room"})
	if _, err := human.RedactEvent(ctx, allowed, withdrawn); err != nil {
		t.Fatal(err)
	}

	cur := base.Cursor
	var cands []string
	var own []string
	var batchCtx [][]byte
	edits, otherRedactions := 0, 0
	deadline := time.Now().Add(30 * time.Second)
	for (len(cands) < 1 || edits < 1 || otherRedactions < 1) && time.Now().Before(deadline) {
		b, err := src.Next(ctx, cur)
		if err != nil {
			t.Fatal(err)
		}
		cur = b.Cursor
		for _, c := range b.Candidates {
			cands = append(cands, c.GetEventId()+"/"+c.GetTrigger())
			batchCtx = append(batchCtx, c.GetBatchEvents()...)
		}
		for _, o := range b.OwnEvents {
			own = append(own, string(o.EventID)+"/"+string(o.TransactionID))
		}
		edits += b.Rejected[string(RejectEdit)]
		otherRedactions += b.Rejected[string(RejectRedactionOther)]
		if b.Rejected[string(RejectRoom)] > 0 {
			t.Logf("dropped %d events from a room outside the allowlist", b.Rejected[string(RejectRoom)])
		}
	}
	if len(cands) != 1 || cands[0] != string(replyToLisa)+"/reply" {
		t.Fatalf("candidates = %v, want only the reply to Lisa", cands)
	}
	if len(batchCtx) == 0 || !strings.Contains(string(batchCtx[len(batchCtx)-1]), "unrelated") {
		t.Fatalf("candidate lacks the preceding events of its sync batch: %d kept", len(batchCtx))
	}
	if edits != 1 || otherRedactions != 1 {
		t.Fatalf("%d edits rejected as edits, %d redactions of chatter rejected; want 1 each", edits, otherRedactions)
	}
	if ledger.asked == 0 {
		t.Fatal("ledger not consulted before the homeserver")
	}
	if len(own) != 1 || own[0] != lisaEvent+"/lisa_src_1" {
		t.Fatalf("own events = %v (the transaction ID comes back to the sending device)", own)
	}
	if cur.GetLastEventIds()[string(allowed)] == "" || cur.GetLastEventIds()[string(forbidden)] != "" {
		t.Fatalf("anchors = %v", cur.GetLastEventIds())
	}

	// A cursor the server cannot parse means: take a new baseline.
	_, err = src.Next(ctx, &roompb.SyncCursor{NextBatch: "garbage", BaselineDone: true})
	var le *messages.Error
	if !errors.As(err, &le) || le.Code != messages.CodeCursorRejected {
		t.Fatalf("bad cursor error = %v", err)
	}
}
