package room

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// editOf is the inbox form of an edit of orig by sender.
func editOf(id, orig, sender, body string, routed bool) *roompb.Candidate {
	return &roompb.Candidate{RoomId: testRoom, EventId: id, Sender: sender, Trigger: "mention",
		Body: body, ReplacesEventId: orig, OriginalRouted: routed}
}

// redactionOf is the inbox form of a redaction of target.
func redactionOf(id, target string) *roompb.Candidate {
	return &roompb.Candidate{RoomId: testRoom, EventId: id, Sender: "@u:hs", Trigger: "redaction", RedactsEventId: target}
}

func inbox(cs ...*roompb.Candidate) InboxLoaded { return InboxLoaded{Candidates: cs} }

func relationsPolicy() Policy {
	p := testPolicy()
	p.WaitReaction, p.WaitReactionAfter = "⏳", 10*time.Second
	p.OverloadReply = func(c *roompb.Candidate) []byte { return []byte(`{"body":"busy","re":"` + c.GetEventId() + `"}`) }
	return p
}

// TestRelationsGolden: edits, redactions, wait reactions and the
// overload reply, each replayed from its journal at the end (the replayed
// state must equal the live one).
func TestRelationsGolden(t *testing.T) {
	scenarios := map[string]func(t *testing.T, d *driver){
		"edit_before_start_answers_new_text": func(t *testing.T, d *driver) {
			d.feed(t, cands("$a", "$b"))
			d.feed(t, inbox(editOf("$e1", "$b", "@u:hs", "secret body edited", true)))
			d.feed(t, inbox(editOf("$e2", "$b", "@other:hs", "secret body hijack", true))) // not the sender's
			d.feed(t, SlotGranted{})
			d.feed(t, inbox(editOf("$e3", "$a", "@u:hs", "secret body too late", true))) // $a has started
			d.feed(t, InvocationDone{EventID: "$a", Attempt: 1, Content: []byte(`{"body":"A"}`)})
			d.feed(t, SendDone{EventID: "$a", ReplyEventID: "$ra"})
			d.feed(t, inbox(editOf("$e4", "$a", "@u:hs", "secret body answered", true))) // after the answer
		},
		"edit_never_invokes": func(t *testing.T, d *driver) {
			// What the sync routes no more (an edit of a message that
			// did not invoke her), as an older version left it in the
			// inbox: ignored, whatever it says.
			d.feed(t, inbox(editOf("$e1", "$m", "@u:hs", "secret body now addressed", false)))
			d.feed(t, inbox(editOf("$e2", "$m", "@u:hs", "secret body again", false)))
			d.feed(t, inbox(editOf("$e3", "$old", "@u:hs", "secret body", true))) // routed, long gone
			// A question and its edit in one batch: the edit applies.
			d.feed(t, inbox(cands("$q").Candidates[0], editOf("$e4", "$q", "@u:hs", "secret body of q, edited", true)))
			d.feed(t, SlotGranted{})
			d.feed(t, InvocationDone{EventID: "$q", Attempt: 1, Content: []byte(`{"body":"Q"}`)})
			d.feed(t, SendDone{EventID: "$q", ReplyEventID: "$rq"})
			d.feed(t, inbox(editOf("$e5", "$m", "@u:hs", "secret body", false)))
		},
		"redaction_drops_queued_and_running": func(t *testing.T, d *driver) {
			d.feed(t, cands("$a", "$b", "$c"))
			d.feed(t, inbox(redactionOf("$x1", "$b")))
			d.feed(t, SlotGranted{})
			d.feed(t, inbox(redactionOf("$x2", "$a"))) // running: stopped
			d.feed(t, InvocationDone{EventID: "$a", Attempt: 1, Content: []byte(`{"body":"A"}`)})
			d.feed(t, inbox(redactionOf("$x3", "$unrelated")))
			d.feed(t, InvocationDone{EventID: "$c", Attempt: 1, Content: []byte(`{"body":"C"}`)})
			d.feed(t, SendDone{EventID: "$c", ReplyEventID: "$rc"})
		},
		"redaction_after_answer_redacts_reply": func(t *testing.T, d *driver) {
			d.feed(t, cands("$a", "$b"))
			d.feed(t, SlotGranted{})
			d.feed(t, InvocationDone{EventID: "$a", Attempt: 1, Content: []byte(`{"body":"A"}`)})
			d.feed(t, inbox(redactionOf("$x1", "$a"))) // being sent: redacted once sent
			d.feed(t, SendDone{EventID: "$a", ReplyEventID: "$ra"})
			d.feed(t, RedactDone{EventID: "$ra", Err: transient(messages.CodeMatrixUnavailable)})
			d.feed(t, RedactDue{})
			d.feed(t, RedactDone{EventID: "$ra"})
			d.feed(t, SlotGranted{})
			d.feed(t, InvocationDone{EventID: "$b", Attempt: 1, Content: []byte(`{"body":"B"}`)})
			d.feed(t, SendDone{EventID: "$b", ReplyEventID: "$rb"})
			d.feed(t, inbox(redactionOf("$x2", "$b"))) // answered: the reply goes
			d.crash(t)
			d.feed(t, Recovered{}) // the redaction is still owed
			d.feed(t, RedactDone{EventID: "$rb", Err: &messages.Error{Code: messages.CodeMatrixForbidden, Permanent: true}})
		},
		"wait_reaction_put_and_removed": func(t *testing.T, d *driver) {
			d.feed(t, cands("$a", "$b"))
			d.feed(t, SlotGranted{})
			d.feed(t, ReactionDue{EventID: "$a"})
			d.feed(t, ReactionDue{EventID: "$b"})
			d.feed(t, ReactionDone{EventID: "$a", ReactionEventID: "$wa"})
			d.feed(t, ReactionDue{EventID: "$a"}) // already there
			d.feed(t, InvocationDone{EventID: "$a", Attempt: 1, Content: []byte(`{"body":"A"}`)})
			d.feed(t, SendDone{EventID: "$a", ReplyEventID: "$ra"})
			d.feed(t, RedactDone{EventID: "$wa"})
			d.crash(t)
			d.now = d.now.Add(3 * time.Second)
			d.feed(t, Recovered{}) // $b's reaction is on its way: asked again after the restart
			d.feed(t, ReactionDone{EventID: "$b", ReactionEventID: "$wb"})
		},
		"redaction_during_recovery_lookup": func(t *testing.T, d *driver) {
			d.feed(t, cands("$a", "$b"))
			d.feed(t, SlotGranted{})
			d.crash(t)
			d.feed(t, Recovered{}) // $a is looked up: its reply may be out
			d.feed(t, inbox(redactionOf("$x", "$a")))
			d.feed(t, ReconcileDone{EventID: "$a", Found: true, ReplyEventID: "$ra"}) // stale
			d.feed(t, SlotGranted{})
		},
		"timeout_gets_overload_reply": func(t *testing.T, d *driver) {
			d.feed(t, cands("$a", "$b"))
			d.feed(t, SlotGranted{})
			d.feed(t, InvocationDone{EventID: "$a", Attempt: 1, Err: &messages.Error{Code: messages.CodeDeadline, Permanent: true}})
			d.feed(t, SendDone{EventID: "$a", ReplyEventID: "$busy"})
			d.feed(t, SlotGranted{})
			d.feed(t, InvocationDone{EventID: "$b", Attempt: 1, Content: []byte(`{"body":"B"}`)})
			d.feed(t, SendDone{EventID: "$b", Err: &messages.Error{Code: messages.CodeMatrixForbidden, Permanent: true}})
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

// TestEditedTextIsAnswered: the attempt gets the edited text and the
// original event ID; an edit after the start changes nothing.
func TestEditedTextIsAnswered(t *testing.T) {
	d := newDriverWith(relationsPolicy())
	d.feed(t, cands("$m"))
	d.feed(t, inbox(editOf("$e1", "$m", "@u:hs", "first", true)))
	d.feed(t, inbox(editOf("$e2", "$m", "@u:hs", "second", true)))
	out := d.m.Decide(SlotGranted{}, d.now)
	if !out.Empty() {
		t.Fatalf("slot grant output %v", out)
	}
	start := d.m.Pump(d.now)
	var got *roompb.Candidate
	for _, e := range start.Early {
		if s, ok := e.(StartInvocation); ok {
			got = s.Candidate
		}
	}
	if got == nil || got.GetEventId() != "$m" || got.GetBody() != "second" || got.GetEditEventId() != "$e2" {
		t.Fatalf("started with %v", got)
	}
}

// TestOverloadReplyOnTimeout: the reply to an invocation that ran out of
// time is the persona's overload message; other failures get the generic
// error.
func TestOverloadReplyOnTimeout(t *testing.T) {
	cases := []struct {
		code messages.Code
		want string
	}{
		{messages.CodeDeadline, "busy"},
		{messages.CodeLLMTimeout, "busy"},
		{messages.CodeLLMRejected, "oops"},
		{messages.CodeLLMBadResponse, "oops"},
	}
	for _, tc := range cases {
		d := newDriverWith(relationsPolicy())
		d.feed(t, cands("$a"))
		d.feed(t, SlotGranted{})
		d.feed(t, InvocationDone{EventID: "$a", Attempt: 1, Err: &messages.Error{Code: tc.code, Permanent: true}})
		if h := d.m.Head(); h == nil || !h.IsError || !strings.Contains(string(h.Content), `"body":"`+tc.want+`"`) {
			t.Errorf("%s: reply %q, want %s", tc.code, d.m.Head().Content, tc.want)
		}
	}
}

// TestEditNeverInvokes: whatever an edit says and however it is marked,
// a room that holds no invocation of its original queues nothing,
// schedules no wait reaction and starts nothing: it only clears the
// edit's inbox entry, with the outcome "edit".
func TestEditNeverInvokes(t *testing.T) {
	for _, routed := range []bool{false, true} {
		for _, trigger := range []string{"mention", "alias", "edit_update"} {
			m := NewMachine(relationsPolicy())
			c := editOf("$e", "$chatter", "@u:hs", "Lisa, now you are addressed", routed)
			c.Trigger = trigger
			out := m.Decide(inbox(c), time.UnixMilli(1_700_000_000_000))
			want := []Effect{RemoveInbox{EventID: "$e", Outcome: OutcomeEdit}}
			if len(out.Events) != 0 || len(out.Early) != 0 || fmt.Sprint(out.Effects) != fmt.Sprint(want) {
				t.Errorf("routed=%v trigger=%s: %s", routed, trigger, describeAll(out))
			}
			if p := m.Pump(time.UnixMilli(1_700_000_000_000)); !p.Empty() {
				t.Errorf("routed=%v trigger=%s: pump %s", routed, trigger, describeAll(p))
			}
		}
	}
}

func describeAll(o Output) string {
	var b strings.Builder
	for _, e := range o.Early {
		b.WriteString(" early " + Describe(e))
	}
	for _, e := range o.Events {
		b.WriteString(" event " + Describe(e))
	}
	for _, e := range o.Effects {
		b.WriteString(" effect " + Describe(e))
	}
	return b.String()
}
