package room

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// findEffects returns the FindToRedact effects of o.
func findEffects(o Output) []FindToRedact {
	var got []FindToRedact
	for _, e := range o.Effects {
		if f, ok := e.(FindToRedact); ok {
			got = append(got, f)
		}
	}
	return got
}

// step runs in through m as the actor does (Decide, apply, pump until
// nothing is left) and returns everything it asked for.
func step(t *testing.T, m *Machine, in Input) (events []string, effects Output) {
	t.Helper()
	now := time.UnixMilli(1_700_000_000_000)
	out := m.Decide(in, now)
	for {
		for _, ev := range out.Events {
			if err := m.Apply(ev); err != nil {
				t.Fatalf("apply %s: %v", Describe(ev), err)
			}
			events = append(events, Describe(ev))
		}
		effects.Effects = append(effects.Effects, out.Effects...)
		effects.Early = append(effects.Early, out.Early...)
		if out = m.Pump(now); out.Empty() {
			break
		}
	}
	return events, effects
}

// TestLookupGivesUpAfterTransientFailures: a lookup that keeps failing
// transiently is given up after LookupAttempts failures (journaled with
// the failure's code) and the next lookup starts; a lookup that takes
// over from one settled meanwhile gets its own LookupAttempts.
func TestLookupGivesUpAfterTransientFailures(t *testing.T) {
	m := NewMachine(relationsPolicy())
	timeout := &messages.Error{Code: messages.CodeShutdown, Ambiguous: true}
	_, out := step(t, m, inbox(redactionOf("$x1", "$old1"), redactionOf("$x2", "$old2")))
	if f := findEffects(out); len(f) != 1 || f[0].EventID != "$old1" {
		t.Fatalf("first lookup %v, want $old1", f)
	}
	for i := 1; i < LookupAttempts; i++ {
		ev, out := step(t, m, FindDone{EventID: "$old1", Kind: LookupReply, Err: timeout})
		if len(ev) != 0 || len(findEffects(out)) != 0 {
			t.Fatalf("failure %d: events %v, effects %s; want a pause", i, ev, describeAll(out))
		}
		if _, out := step(t, m, FindDue{}); len(findEffects(out)) != 1 || findEffects(out)[0].EventID != "$old1" {
			t.Fatalf("after failure %d: %s, want $old1 again", i, describeAll(out))
		}
	}
	ev, out := step(t, m, FindDone{EventID: "$old1", Kind: LookupReply, Err: timeout})
	if want := "LookupDone $old1 kind=reply found= code=shutdown"; len(ev) != 1 || ev[0] != want {
		t.Fatalf("after %d failures: events %v, want [%s]", LookupAttempts, ev, want)
	}
	if f := findEffects(out); len(f) != 1 || f[0].EventID != "$old2" {
		t.Fatalf("after giving up $old1: %s, want the lookup of $old2", describeAll(out))
	}
	if len(m.Lookups) != 1 || m.Lookups[0].EventID != "$old2" {
		t.Fatalf("lookups %v", m.Lookups)
	}
	// $old2 fails too, but once only before a permanent answer: given
	// up with that answer's code.
	step(t, m, FindDone{EventID: "$old2", Kind: LookupReply, Err: timeout})
	step(t, m, FindDue{})
	if ev, _ := step(t, m, FindDone{EventID: "$old2", Kind: LookupReply, Err: &messages.Error{Code: messages.CodeMatrixForbidden, Permanent: true}}); len(ev) != 1 || ev[0] != "LookupDone $old2 kind=reply found= code=matrix_forbidden" {
		t.Fatalf("permanent failure: events %v", ev)
	}

	// A reaction lookup fails, then is settled (its reaction confirmed):
	// the lookup after it starts its count afresh.
	m = NewMachine(relationsPolicy())
	m.Lookups = []Lookup{{EventID: "$a", Kind: LookupReaction}, {EventID: "$q", Kind: LookupReply}}
	step(t, m, Recovered{})
	for range LookupAttempts - 1 {
		step(t, m, FindDone{EventID: "$a", Kind: LookupReaction, Err: timeout})
		step(t, m, FindDue{})
	}
	if ev, _ := step(t, m, ReactionDone{EventID: "$a", ReactionEventID: "$wa"}); fmt.Sprint(ev) != "[ReactionSent $a reaction=$wa]" {
		t.Fatalf("confirmation: %v", ev)
	}
	step(t, m, FindDone{EventID: "$a", Kind: LookupReaction, Err: timeout}) // settled meanwhile
	for i := 1; i < LookupAttempts; i++ {
		if ev, _ := step(t, m, FindDone{EventID: "$q", Kind: LookupReply, Err: timeout}); len(ev) != 0 {
			t.Fatalf("$q failure %d: %v; want a pause (failures of $a counted for $q)", i, ev)
		}
		step(t, m, FindDue{})
	}
	if ev, _ := step(t, m, FindDone{EventID: "$q", Kind: LookupReply, Err: timeout}); len(ev) != 1 {
		t.Fatalf("$q after %d failures: %v", LookupAttempts, ev)
	}
}

// TestLookupsGolden: the review findings on lookups of issue #31 —
// given up after LookupAttempts transient failures, dropped beyond
// LookupLimit, never made for an edit — each replayed from its journal at
// the end.
func TestLookupsGolden(t *testing.T) {
	timeout := &messages.Error{Code: messages.CodeShutdown, Ambiguous: true}
	scenarios := map[string]func(t *testing.T, d *driver){
		"lookup_given_up_after_transient_failures": func(t *testing.T, d *driver) {
			d.feed(t, inbox(redactionOf("$x1", "$old1"), redactionOf("$x2", "$old2")))
			for range LookupAttempts - 1 {
				d.feed(t, FindDone{EventID: "$old1", Kind: LookupReply, Err: timeout})
				d.feed(t, FindDue{})
			}
			// The last failure gives $old1 up; $old2 is looked up.
			d.feed(t, FindDone{EventID: "$old1", Kind: LookupReply, Err: timeout})
			d.feed(t, FindDone{EventID: "$old2", Kind: LookupReply, Found: []string{"$r2"}})
			d.feed(t, RedactDone{EventID: "$r2"})
		},
		"redaction_of_edit_looks_nothing_up": func(t *testing.T, d *driver) {
			d.feed(t, cands("$a", "$b"))
			d.feed(t, inbox(editOf("$e1", "$b", "@u:hs", "secret body edited", true))) // $b takes its text
			d.feed(t, inbox(redactionOf("$x1", "$e1")))
			d.feed(t, SlotGranted{})
			// An edit ignored ($a has started) and its redaction, and a
			// question with its edit and the edit's redaction, in one
			// batch each.
			d.feed(t, inbox(editOf("$e2", "$a", "@u:hs", "secret body late", true), redactionOf("$x2", "$e2")))
			d.feed(t, inbox(cands("$c").Candidates[0], editOf("$e3", "$c", "@u:hs", "secret body c", true), redactionOf("$x3", "$e3")))
		},
		"lookups_beyond_bound_dropped": func(t *testing.T, d *driver) {
			var batch []*roompb.Candidate
			for i := range LookupLimit + 1 {
				batch = append(batch, redactionOf(fmt.Sprintf("$x%d", i), fmt.Sprintf("$q%d", i)))
			}
			d.feed(t, inbox(batch...))                // $q0 dropped, $q1 looked up
			d.feed(t, inbox(redactionOf("$y", "$p"))) // $q2 dropped, not $q1 in flight
			d.crash(t)
			d.feed(t, Recovered{}) // bounded already: nothing dropped
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

// TestGivenUpLookupIsLoggedAtWarn: a lookup journaled as given up is
// logged at WARN with its kind, code and hashed event ID, never the ID
// itself; one that ended is logged at INFO.
func TestGivenUpLookupIsLoggedAtWarn(t *testing.T) {
	var buf strings.Builder
	r := &roomActor{cfg: &Config{Logger: slog.New(slog.NewTextHandler(&buf, nil))}, room: testRoom}
	r.logTransition(&roompb.LookupDone{EventId: "$old1", Kind: LookupReply, Code: "shutdown"})
	line := buf.String()
	for _, want := range []string{"level=WARN", "kind=reply", "code=shutdown", "event=" + messages.Hash("$old1")} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "$old1") {
		t.Errorf("log line %q names the event", line)
	}
	buf.Reset()
	r.logTransition(&roompb.LookupDone{EventId: "$old3", Kind: LookupReaction, Code: LookupDropped})
	line = buf.String()
	for _, want := range []string{"level=WARN", "kind=reaction", "code=lookup_dropped", "bound=64", "event=" + messages.Hash("$old3")} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q lacks %q", line, want)
		}
	}
	buf.Reset()
	r.logTransition(&roompb.LookupDone{EventId: "$old2", Kind: LookupReaction, FoundEventIds: []string{"$w"}})
	if !strings.Contains(buf.String(), "level=INFO") {
		t.Errorf("a lookup that ended: %q, want INFO", buf.String())
	}
}

type lookupCounter struct{ got []string }

func (c *lookupCounter) Outcome(string)              {}
func (c *lookupCounter) Phase(string, time.Duration) {}
func (c *lookupCounter) Lookup(kind, result string)  { c.got = append(c.got, kind+":"+result) }
func (c *lookupCounter) RateLimited(time.Duration)   {}

// TestLookupResultsAreCounted: every ended lookup reaches the observer
// (metrics) with its kind and result, drops and give-ups included.
func TestLookupResultsAreCounted(t *testing.T) {
	c := &lookupCounter{}
	r := &roomActor{cfg: &Config{Observer: c}, room: testRoom, m: NewMachine(relationsPolicy())}
	for _, ev := range []*roompb.LookupDone{
		{EventId: "$a", Kind: LookupReply, FoundEventIds: []string{"$r"}},
		{EventId: "$b", Kind: LookupReaction, FoundEventIds: []string{}},
		{EventId: "$c", Kind: LookupReply, Code: "shutdown"},
		{EventId: "$d", Kind: LookupReaction, Code: LookupDropped},
	} {
		r.observe(ev, time.UnixMilli(1_700_000_000_000))
	}
	if want := "[reply:found reaction:none reply:given_up reaction:lookup_dropped]"; fmt.Sprint(c.got) != want {
		t.Fatalf("observed %v, want %s", c.got, want)
	}
}

// TestRedactionOfEditLooksNothingUp: a redaction of an edit the room knows
// of (a queued invocation's, or one in the same batch) starts no lookup and
// journals nothing: no reply of Lisa's relates to an edit.
func TestRedactionOfEditLooksNothingUp(t *testing.T) {
	m := NewMachine(relationsPolicy())
	step(t, m, cands("$a"))
	step(t, m, inbox(editOf("$e1", "$a", "@u:hs", "edited", true)))
	for _, in := range []InboxLoaded{
		inbox(redactionOf("$x1", "$e1")),
		inbox(editOf("$e2", "$a", "@other:hs", "not theirs", true), redactionOf("$x2", "$e2")),
	} {
		events, out := step(t, m, in)
		if len(events) != 0 || len(findEffects(out)) != 0 || len(m.Lookups) != 0 {
			t.Fatalf("events %v, effects %s, lookups %v; want none", events, describeAll(out), m.Lookups)
		}
		last := out.Effects[len(out.Effects)-1]
		if want := (RemoveInbox{EventID: in.Candidates[len(in.Candidates)-1].GetEventId(), Outcome: OutcomeEditRedaction}); last != want {
			t.Fatalf("last effect %s, want %s", Describe(last), Describe(want))
		}
	}
}
