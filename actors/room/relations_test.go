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
			// Routed once but unknown to the room: its reply, if any,
			// is looked up on the homeserver.
			d.feed(t, inbox(redactionOf("$x3", "$unrelated")))
			d.feed(t, FindDone{EventID: "$unrelated", Kind: LookupReply, Found: []string{}})
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
		// While the homeserver's rate limit holds the room, a wait
		// reaction falls due and is not put (it would take a send the
		// answers need); one due after the wait is put.
		"no_wait_reaction_while_rate_limited": func(t *testing.T, d *driver) {
			d.feed(t, cands("$a", "$b", "$c"))
			d.feed(t, SlotGranted{})
			d.feed(t, InvocationDone{EventID: "$a", Attempt: 1, Content: []byte(`{"body":"A"}`)})
			d.feed(t, SendDone{EventID: "$a", Err: transient(messages.CodeMatrixRateLimit), RetryAfter: 5 * time.Second})
			d.now = d.now.Add(2 * time.Second) // 3 s into the 5 s wait
			d.feed(t, ReactionDue{EventID: "$b"})
			d.now = d.now.Add(2 * time.Second)
			d.feed(t, ResendDue{EventID: "$a"})
			d.feed(t, SendDone{EventID: "$a", ReplyEventID: "$ra"})
			d.feed(t, ReactionDue{EventID: "$c"})
			d.feed(t, ReactionDone{EventID: "$c", ReactionEventID: "$wc"})
		},
		"redaction_during_recovery_lookup": func(t *testing.T, d *driver) {
			d.feed(t, cands("$a", "$b"))
			d.feed(t, SlotGranted{})
			d.crash(t)
			d.feed(t, Recovered{}) // $a is looked up: its reply may be out
			d.feed(t, inbox(redactionOf("$x", "$a")))
			d.feed(t, ReconcileDone{EventID: "$a", Found: true, ReplyEventID: "$ra"}) // stale
			d.feed(t, AnsweredChecked{EventID: "$b"})
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

// answerQuietly answers the questions ids one after another without
// writing the steps into the transcript.
func (d *driver) answerQuietly(t *testing.T, ids ...string) {
	t.Helper()
	saved := d.out.String()
	for _, id := range ids {
		d.feed(t, cands(id))
		d.feed(t, SlotGranted{})
		d.feed(t, InvocationDone{EventID: id, Attempt: 1, Content: []byte(`{"body":"x"}`)})
		d.feed(t, SendDone{EventID: id, ReplyEventID: "$r" + id[1:]})
	}
	d.out.Reset()
	fmt.Fprintf(&d.out, "%s-- %d questions answered (not shown)\n", saved, len(ids))
}

// TestRelationGapsGolden: the relation gaps of issue #31 item 4 — a
// redaction while a restarted room looks up an early reply, a redaction of
// a question answered before the room's memory begins, one overload
// notice per burst with edits in it, and a wait reaction requested just
// before a kill. Each is replayed from its journal at the end.
func TestRelationGapsGolden(t *testing.T) {
	overload := relationsPolicy()
	overload.MaxQueue, overload.NoticeEvery = 2, time.Minute
	scenarios := map[string]struct {
		policy Policy
		run    func(t *testing.T, d *driver)
	}{
		"redaction_during_recovery_lookup_miss": {relationsPolicy(), func(t *testing.T, d *driver) {
			d.feed(t, cands("$a", "$b"))
			d.feed(t, SlotGranted{})
			d.crash(t)
			start := d.now
			d.feed(t, Recovered{}) // $a is looked up: its reply may be out
			d.feed(t, inbox(redactionOf("$x", "$a")))
			// An early miss proves nothing: looked up again, not sent.
			d.feed(t, ReconcileDone{EventID: "$a", LookedAt: start.Add(time.Second), QuietSince: start})
			d.feed(t, ResendDue{EventID: "$a"})
			// A miss that counts: dropped, never answered.
			d.feed(t, ReconcileDone{EventID: "$a", LookedAt: start.Add(10 * time.Second), QuietSince: start})
			d.feed(t, AnsweredChecked{EventID: "$b"})
			d.feed(t, SlotGranted{})
		}},
		"redaction_during_failing_recovery_lookup_survives_restart": {relationsPolicy(), func(t *testing.T, d *driver) {
			d.feed(t, cands("$a"))
			d.feed(t, SlotGranted{})
			d.crash(t)
			d.feed(t, Recovered{})
			d.feed(t, ReconcileDone{EventID: "$a", Err: transient(messages.CodeMatrixUnavailable)})
			d.feed(t, inbox(redactionOf("$x", "$a"))) // while the lookup waits to be tried again
			d.crash(t)
			d.feed(t, Recovered{}) // still looked up, never answered
			d.feed(t, ReconcileDone{EventID: "$a", Found: true, ReplyEventID: "$ra"})
			d.feed(t, RedactDone{EventID: "$ra"})
		}},
		"redaction_of_unsent_ready_reply_drops_it": {relationsPolicy(), func(t *testing.T, d *driver) {
			d.feed(t, cands("$a"))
			d.feed(t, SlotGranted{})
			d.feed(t, InvocationDone{EventID: "$a", Attempt: 1, Content: []byte(`{"body":"A"}`)})
			// Refused before it was stored: nothing of it is out.
			d.feed(t, SendDone{EventID: "$a", Err: transient(messages.CodeMatrixRateLimit)})
			d.feed(t, inbox(redactionOf("$x", "$a")))
			d.feed(t, ResendDue{EventID: "$a"}) // dropped, not sent
		}},
		"redaction_of_answer_beyond_memory_looks_it_up": {relationsPolicy(), func(t *testing.T, d *driver) {
			ids := make([]string, RecentLimit+1)
			for i := range ids {
				ids[i] = fmt.Sprintf("$q%d", i)
			}
			d.answerQuietly(t, ids...)
			// $q0's reply is no longer remembered: looked up.
			d.feed(t, inbox(redactionOf("$x0", "$q0"), redactionOf("$x1", "$q1")))
			d.feed(t, FindDone{EventID: "$q0", Kind: LookupReply, Err: transient(messages.CodeMatrixUnavailable)})
			d.crash(t)
			d.feed(t, Recovered{}) // the lookups are durable
			d.feed(t, FindDone{EventID: "$q0", Kind: LookupReply, Found: []string{"$rq0"}})
			// $q1 is remembered: its reply is redacted at once; then
			// the one found.
			d.feed(t, RedactDone{EventID: "$rq1"})
			d.feed(t, RedactDone{EventID: "$rq0"})
			d.feed(t, inbox(redactionOf("$x2", "$never-answered")))
			d.feed(t, FindDone{EventID: "$never-answered", Kind: LookupReply, Found: []string{}})
		}},
		"one_notice_per_burst_with_edits": {overload, func(t *testing.T, d *driver) {
			d.feed(t, cands("$a"))
			d.feed(t, SlotGranted{})
			// A burst: $b queued, $c $d refused ($c with the notice),
			// and edits of each, of chatter, and of the refused ones.
			d.feed(t, inbox(
				cands("$b", "$c").Candidates[0], cands("$c").Candidates[0],
				editOf("$e1", "$c", "@u:hs", "secret body edited", true),
				editOf("$e2", "$chatter", "@u:hs", "secret body Lisa?", false),
				cands("$d").Candidates[0],
				editOf("$e3", "$b", "@u:hs", "secret body b edited", true),
			))
			// The burst goes on: edits of the refused questions and the
			// notice, another refused question, no second notice.
			d.feed(t, inbox(editOf("$e4", "$d", "@u:hs", "secret body", true), cands("$f").Candidates[0],
				editOf("$e5", "$chatter2", "@u:hs", "secret body Lisa!", false)))
			d.feed(t, InvocationDone{EventID: "$a", Attempt: 1, Content: []byte(`{"body":"A"}`)})
			d.feed(t, SendDone{EventID: "$a", ReplyEventID: "$ra"})
			d.feed(t, SendDone{EventID: "$c", ReplyEventID: "$busy"})
		}},
		"wait_reaction_requested_before_kill_is_found": {relationsPolicy(), func(t *testing.T, d *driver) {
			d.feed(t, cands("$a", "$b"))
			d.feed(t, SlotGranted{})
			d.feed(t, ReactionDue{EventID: "$a"})
			d.feed(t, ReactionDue{EventID: "$b"})
			// $b's response is lost; $a's request is in flight at the crash.
			d.feed(t, ReactionDone{EventID: "$b", Err: &messages.Error{Code: messages.CodeMatrixUnavailable, Ambiguous: true}})
			d.crash(t)
			d.now = d.now.Add(20 * time.Second)
			d.feed(t, Recovered{}) // neither is requested again
			d.feed(t, ReconcileDone{EventID: "$a", LookedAt: d.now.Add(10 * time.Second), QuietSince: d.now})
			d.feed(t, SlotGranted{})
			d.feed(t, InvocationDone{EventID: "$a", Attempt: 2, Content: []byte(`{"body":"A"}`)})
			d.feed(t, SendDone{EventID: "$a", ReplyEventID: "$ra"})
			d.feed(t, FindDone{EventID: "$a", Kind: LookupReaction, Found: []string{"$wa"}})
			d.feed(t, RedactDone{EventID: "$wa"})
			d.feed(t, AnsweredChecked{EventID: "$b"})
			d.feed(t, SlotGranted{})
			d.feed(t, InvocationDone{EventID: "$b", Attempt: 1, Content: []byte(`{"body":"B"}`)})
			d.feed(t, SendDone{EventID: "$b", ReplyEventID: "$rb"})
			d.feed(t, FindDone{EventID: "$b", Kind: LookupReaction, Found: []string{"$wb"}})
			d.feed(t, RedactDone{EventID: "$wb"})
		}},
		"wait_reaction_confirmed_during_lookup": {relationsPolicy(), func(t *testing.T, d *driver) {
			d.feed(t, cands("$a"))
			d.feed(t, SlotGranted{})
			d.feed(t, ReactionDue{EventID: "$a"})
			d.feed(t, InvocationDone{EventID: "$a", Attempt: 1, Content: []byte(`{"body":"A"}`)})
			d.feed(t, SendDone{EventID: "$a", ReplyEventID: "$ra"}) // ends before the reaction is confirmed
			d.feed(t, ReactionDone{EventID: "$a", ReactionEventID: "$wa"})
			d.feed(t, FindDone{EventID: "$a", Kind: LookupReaction, Found: []string{"$wa"}}) // settled already
			d.feed(t, RedactDone{EventID: "$wa"})
		}},
	}
	for name, sc := range scenarios {
		t.Run(name, func(t *testing.T) {
			d := newDriverWith(sc.policy)
			sc.run(t, d)
			d.checkGolden(t, name)
		})
	}
}

// TestLookupsAreBounded: the lookups a room keeps are at most LookupLimit
// after every step: beyond it the oldest, but the one in flight, are
// dropped with a journaled LookupDone (code LookupDropped). (Before, Apply
// cut the oldest off silently; the bound is now the machine's.)
func TestLookupsAreBounded(t *testing.T) {
	m := NewMachine(relationsPolicy())
	var batch []*roompb.Candidate
	for i := range LookupLimit + 5 {
		batch = append(batch, redactionOf(fmt.Sprintf("$x%d", i), fmt.Sprintf("$q%d", i)))
	}
	events, out := step(t, m, inbox(batch...))
	var dropped []string
	for _, ev := range events {
		if strings.HasPrefix(ev, "LookupDone") {
			dropped = append(dropped, ev)
		}
	}
	if len(dropped) != 5 || dropped[0] != "LookupDone $q0 kind=reply found= code=lookup_dropped" || !strings.HasPrefix(dropped[4], "LookupDone $q4 ") {
		t.Fatalf("dropped %v, want $q0…$q4", dropped)
	}
	if len(m.Lookups) != LookupLimit || m.Lookups[0].EventID != "$q5" {
		t.Fatalf("lookups = %d, first %v", len(m.Lookups), m.Lookups[0])
	}
	if f := findEffects(out); len(f) != 1 || f[0].EventID != "$q5" {
		t.Fatalf("lookup started: %v, want $q5", f)
	}
	// One more while $q5 is in flight: $q6 goes, not $q5.
	events, _ = step(t, m, inbox(redactionOf("$xn", "$qn")))
	if fmt.Sprint(events) != "[InvocationRedacted $qn redaction=$xn reply= find_reply LookupDone $q6 kind=reply found= code=lookup_dropped]" {
		t.Fatalf("events %v", events)
	}
	if len(m.Lookups) != LookupLimit || m.Lookups[0].EventID != "$q5" {
		t.Fatalf("lookups = %d, first %v", len(m.Lookups), m.Lookups[0])
	}
	// A lookup added by an ending invocation (its wait reaction was
	// requested, never confirmed) is bounded the same way.
	step(t, m, cands("$a"))
	step(t, m, SlotGranted{})
	step(t, m, ReactionDue{EventID: "$a"})
	step(t, m, InvocationDone{EventID: "$a", Attempt: 1, Content: []byte(`{}`)})
	events, _ = step(t, m, SendDone{EventID: "$a", ReplyEventID: "$ra"})
	if fmt.Sprint(events) != "[ReplySent $a reply=$ra reconciled=false LookupDone $q7 kind=reply found= code=lookup_dropped]" {
		t.Fatalf("events %v", events)
	}
	if len(m.Lookups) != LookupLimit || m.Lookups[LookupLimit-1] != (Lookup{EventID: "$a", Kind: LookupReaction}) {
		t.Fatalf("lookups = %d, last %v", len(m.Lookups), m.Lookups[LookupLimit-1])
	}
}
