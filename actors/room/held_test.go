package room

import (
	"fmt"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

func forbidden() *messages.Error {
	return &messages.Error{Code: messages.CodeMatrixForbidden, Message: "homeserver refused (403 M_FORBIDDEN)", Permanent: true}
}

// permissionChange is the inbox form of a change of the room's power
// levels or of Lisa's membership.
func permissionChange(id, trigger string) *roompb.Candidate {
	return &roompb.Candidate{RoomId: testRoom, EventId: id, Sender: "@admin:hs", Trigger: trigger}
}

// TestHeldGolden: a reply refused with M_FORBIDDEN is held out of the
// queue, released by a change of the room's permissions or the
// operator, looked up and then sent once with its original transaction
// ID, across restarts; held replies are bounded in number and age.
func TestHeldGolden(t *testing.T) {
	answer := func(d *driver, t *testing.T, id string) {
		d.feed(t, SlotGranted{})
		d.feed(t, InvocationDone{EventID: id, Attempt: 1, Content: []byte(`{"body":"` + id + `"}`)})
	}
	scenarios := map[string]func(t *testing.T, d *driver){
		"forbidden_reply_held_then_released_by_power_levels": func(t *testing.T, d *driver) {
			d.feed(t, cands("$a", "$b"))
			answer(d, t, "$a")
			d.feed(t, SendDone{EventID: "$a", Err: forbidden()}) // held: $b goes on
			answer(d, t, "$b")
			d.feed(t, SendDone{EventID: "$b", Err: forbidden()})
			d.feed(t, cands("$c"))
			answer(d, t, "$c")
			// The power levels change while $c is being sent: $a and $b
			// go right behind it, in order.
			d.feed(t, inbox(permissionChange("$pl", messages.TriggerPowerLevels), permissionChange("$pl2", messages.TriggerMembership)))
			d.feed(t, SendDone{EventID: "$c", ReplyEventID: "$rc"})
			quiet := d.now.Add(-time.Minute)
			d.feed(t, ReconcileDone{EventID: "$a", LookedAt: d.now, QuietSince: quiet})
			d.feed(t, SendDone{EventID: "$a", ReplyEventID: "$ra"})
			d.feed(t, ReconcileDone{EventID: "$b", LookedAt: d.now, QuietSince: quiet})
			d.feed(t, SendDone{EventID: "$b", ReplyEventID: "$rb"})
			// A change with nothing held is only cleared out.
			d.feed(t, inbox(permissionChange("$pl3", messages.TriggerPowerLevels)))
		},
		"held_reply_sent_once_across_restarts": func(t *testing.T, d *driver) {
			d.feed(t, cands("$a"))
			answer(d, t, "$a")
			d.feed(t, SendDone{EventID: "$a", Err: forbidden()})
			d.crash(t) // killed between the refusal and the fix
			d.feed(t, Recovered{})
			d.feed(t, ResendHeld{}) // the operator's resend
			d.feed(t, ReconcileDone{EventID: "$a", LookedAt: d.now, QuietSince: d.now.Add(-time.Minute)})
			// Killed while the reply is on its way: the restarted room
			// looks it up (it went out) instead of sending it again.
			d.crash(t)
			d.feed(t, Recovered{})
			d.feed(t, ReconcileDone{EventID: "$a", Found: true, ReplyEventID: "$ra", LookedAt: d.now, QuietSince: d.now.Add(-time.Minute)})
			d.feed(t, ResendHeld{}) // nothing held: nothing to do
		},
		"released_reply_refused_again_is_held_again": func(t *testing.T, d *driver) {
			d.feed(t, cands("$a"))
			answer(d, t, "$a")
			d.feed(t, SendDone{EventID: "$a", Err: forbidden()})
			d.feed(t, inbox(permissionChange("$m", messages.TriggerMembership)))
			d.feed(t, ReconcileDone{EventID: "$a", LookedAt: d.now, QuietSince: d.now.Add(-time.Minute)})
			d.feed(t, SendDone{EventID: "$a", Err: forbidden()}) // the change did not let Lisa post
		},
		"redaction_of_held_question_drops_it": func(t *testing.T, d *driver) {
			d.feed(t, cands("$a"))
			answer(d, t, "$a")
			d.feed(t, SendDone{EventID: "$a", Err: forbidden()})
			d.feed(t, inbox(redactionOf("$x", "$a")))
			d.feed(t, inbox(permissionChange("$pl", messages.TriggerPowerLevels)))
		},
		"error_reply_refused_is_held_too": func(t *testing.T, d *driver) {
			d.feed(t, cands("$a"))
			d.feed(t, SlotGranted{})
			d.feed(t, InvocationDone{EventID: "$a", Attempt: 1, Err: &messages.Error{Code: messages.CodeLLMRejected, Permanent: true}})
			d.feed(t, SendDone{EventID: "$a", Err: forbidden()})
			d.feed(t, ResendHeld{})
			d.feed(t, ReconcileDone{EventID: "$a", LookedAt: d.now, QuietSince: d.now.Add(-time.Minute)})
			d.feed(t, SendDone{EventID: "$a", ReplyEventID: "$ra"})
		},
		"held_replies_expire": func(t *testing.T, d *driver) {
			d.feed(t, cands("$a"))
			answer(d, t, "$a")
			d.feed(t, SendDone{EventID: "$a", Err: forbidden()})
			d.now = d.now.Add(HeldTTL / 2)
			d.feed(t, cands("$b"))
			answer(d, t, "$b")
			d.feed(t, SendDone{EventID: "$b", Err: forbidden()})
			d.now = d.now.Add(HeldTTL / 2)
			d.feed(t, HeldExpiryDue{}) // $a is a day old: dropped
			d.crash(t)
			d.feed(t, Recovered{}) // the expiry of $b is scheduled again
			d.now = d.now.Add(HeldTTL / 2)
			d.feed(t, inbox(permissionChange("$pl", messages.TriggerPowerLevels))) // too late for $b
		},
	}
	for name, run := range scenarios {
		t.Run(name, func(t *testing.T) {
			d := newDriverWith(relationsPolicy())
			run(t, d)
			d.checkGolden(t, name)
		})
	}
}

// TestHeldIsBounded: beyond HeldLimit the oldest held replies are
// dropped, each journaled, and the newest HeldLimit stay.
func TestHeldIsBounded(t *testing.T) {
	d := newDriver()
	for i := range HeldLimit + 3 {
		id := fmt.Sprintf("$%d", i)
		d.feed(t, cands(id))
		d.feed(t, SlotGranted{})
		d.feed(t, InvocationDone{EventID: id, Attempt: 1, Content: []byte(`{}`)})
		d.feed(t, SendDone{EventID: id, Err: forbidden()})
		if len(d.m.Held) > HeldLimit {
			t.Fatalf("after %s: %d held, bound %d", id, len(d.m.Held), HeldLimit)
		}
	}
	var dropped []string
	for _, ev := range d.journal {
		if e, ok := ev.(*roompb.HeldDropped); ok {
			dropped = append(dropped, e.GetEventId()+":"+e.GetReason())
		}
	}
	if want := []string{"$0:overflow", "$1:overflow", "$2:overflow"}; fmt.Sprint(dropped) != fmt.Sprint(want) {
		t.Fatalf("dropped %v, want %v", dropped, want)
	}
	if len(d.m.Held) != HeldLimit || d.m.Held[0].EventID() != "$3" || d.m.Abandoned != 3 {
		t.Fatalf("held %d, first %s, abandoned %d", len(d.m.Held), d.m.Held[0].EventID(), d.m.Abandoned)
	}
	if !d.m.Knows("$5") || d.m.Queued("$5") != nil {
		t.Fatal("a held invocation must be known (a repeated inbox entry is a duplicate) and out of the queue")
	}
	d.crash(t)
	d.feed(t, Recovered{})
	d.feed(t, ResendHeld{})
	if len(d.m.Held) != 0 || len(d.m.Queue) != HeldLimit {
		t.Fatalf("after resend: %d held, %d queued", len(d.m.Held), len(d.m.Queue))
	}
}
