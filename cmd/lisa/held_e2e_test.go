package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/trail"
)

// lisaTxnID returns the transaction ID Lisa's reply to ev carries in her
// own view of room (unsigned.transaction_id in /sync: same token, same
// device).
func (e *e2e) lisaTxnID(room id.RoomID, ev id.EventID) string {
	e.t.Helper()
	filter := `{"room":{"rooms":["` + string(room) + `"],"timeline":{"limit":50,"types":["m.room.message"]},` +
		`"state":{"not_types":["*"]},"ephemeral":{"not_types":["*"]}},"presence":{"not_types":["*"]}}`
	resp, err := e.lisaClient().FullSyncRequest(e.ctx, mautrix.ReqSync{FilterID: filter})
	if err != nil {
		e.t.Fatal(err)
	}
	if jr := resp.Rooms.Join[room]; jr != nil {
		for _, evt := range jr.Timeline.Events {
			if string(evt.Sender) == e.bot.UserID && strings.Contains(string(evt.Content.VeryRaw), string(ev)) {
				return evt.Unsigned.TransactionID
			}
		}
	}
	return ""
}

// setPostLevel sets who may post messages in room: events_default, and
// Lisa's own level (0 leaves her at the users_default).
func (e *e2e) setPostLevel(room id.RoomID, eventsDefault, lisa int) {
	e.t.Helper()
	var pl event.PowerLevelsEventContent
	if err := e.human.StateEvent(e.ctx, room, event.StatePowerLevels, "", &pl); err != nil {
		e.t.Fatal(err)
	}
	pl.EventsDefault = eventsDefault
	if pl.Users == nil {
		pl.Users = map[id.UserID]int{}
	}
	if lisa == 0 {
		delete(pl.Users, id.UserID(e.bot.UserID))
	} else {
		pl.Users[id.UserID(e.bot.UserID)] = lisa
	}
	if _, err := e.human.SendStateEvent(e.ctx, room, event.StatePowerLevels, "", &pl); err != nil {
		e.t.Fatal(err)
	}
}

// heldEvents returns the events of the held replies `lisa shell held
// --json` lists.
func (e *e2e) heldEvents() []string {
	e.t.Helper()
	var rows []struct {
		Room  string `json:"room"`
		Event string `json:"event"`
	}
	out := e.shell("held\n", "--json")
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &rows); err != nil {
		e.t.Fatalf("held output %q: %v", out, err)
	}
	var evs []string
	for _, r := range rows {
		evs = append(evs, r.Event)
	}
	return evs
}

// awaitHeld waits until the shell lists exactly want as held.
func (e *e2e) awaitHeld(want ...string) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for got := e.heldEvents(); strings.Join(got, ",") != strings.Join(want, ","); got = e.heldEvents() {
		if time.Now().After(deadline) {
			e.t.Fatalf("held replies %v, want %v; logs:\n%s", got, want, e.proc.text())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRefusedReplyWaitsForTheFix: power levels raised so that Lisa may
// not post; her answer is refused with M_FORBIDDEN and held (the shell
// shows it, lisa health is degraded); the operator's resend while the
// room still refuses her holds it again; Lisa is killed and restarted
// between the refusal and the fix; once she is given the power to post
// the reply is sent once, with the same content, and never again across
// another kill and restart.
func TestRefusedReplyWaitsForTheFix(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		room := e.allowed[0]
		p := e.start()
		e.awaitLog(p, "sync baseline recorded")
		e.setPostLevel(room, 50, 0)

		q := e.mention(room, "what is the capital of France?")
		e.awaitLog(p, "reply held")
		e.awaitHeld(string(q))
		if got := e.replies(room)[q]; got != 0 {
			t.Fatalf("%d replies while Lisa may not post", got)
		}
		if out := e.shell("rooms\n"); !strings.Contains(out, "HELD") {
			t.Fatalf("rooms table without held replies:\n%s", out)
		}
		if out := e.shell("health\n", "--json"); !strings.Contains(out, `"held_replies":1`) || !strings.Contains(out, `"status":"degraded"`) {
			t.Fatalf("health with a held reply: %s", out)
		}
		if r := e.why(q); !r.Seen || r.Entry.Outcome != trail.Held {
			t.Fatalf("why %s: seen %v, outcome %q, want %q", q, r.Seen, r.Entry.Outcome, trail.Held)
		}

		// resend while the room still refuses her: looked up, sent, refused,
		// held again.
		var rows []struct {
			Room     string `json:"room"`
			Released int    `json:"released"`
		}
		if out := e.shell("resend "+string(room)+"\n", "--json"); json.Unmarshal([]byte(strings.TrimSpace(out)), &rows) != nil ||
			len(rows) != 1 || rows[0].Released != 1 {
			t.Fatalf("resend: %s", out)
		}
		e.awaitLog(p, "reply held")
		e.awaitHeld(string(q))
		if !strings.Contains(p.text(), `"reason":"operator"`) {
			t.Fatalf("the operator's release is not logged; logs:\n%s", p.text())
		}

		// Killed between the refusal and the fix.
		p.kill()
		p = e.start()
		e.awaitLog(p, "lisa running")
		e.awaitHeld(string(q))

		fixed := time.Now()
		e.setPostLevel(room, 50, 50)
		e.awaitReply(room, q)
		t.Logf("the held reply reached the room %s after the power levels were fixed", time.Since(fixed).Round(time.Millisecond))
		e.awaitHeld()
		first := e.settle(room)
		if !strings.Contains(p.text(), `"reason":"power_levels"`) {
			t.Fatalf("no release by the power levels change logged; logs:\n%s", p.text())
		}
		// Sent with its original transaction ID: the one derived from the
		// room and the question (Lisa's own events carry it back to her).
		if txn := e.lisaTxnID(room, q); txn != string(messages.ReplyTxnID(messages.RoomID(room), messages.EventID(q))) {
			t.Fatalf("the reply went out with transaction ID %q", txn)
		}

		// And never again across a restart.
		p.kill()
		p = e.start()
		e.awaitLog(p, "lisa running")
		second := e.settle(room)
		e.expectReplies(room, map[id.EventID]int{q: 1, first: 1, second: 1})
		if n := e.lisaMessages(room); n != 3 {
			t.Fatalf("Lisa has %d messages in the room, want 3 (the held reply and two sentinels)", n)
		}
		if out := e.shell("health\n", "--json"); strings.Contains(out, "held_replies") {
			t.Fatalf("health after the fix: %s", out)
		}
		// The reply is the answer to the question, not an error.
		if !strings.Contains(e.replyBody(room, q), "answer: what is the capital of France?") {
			t.Fatalf("reply to the question: %q", e.replyBody(room, q))
		}
	})
}
