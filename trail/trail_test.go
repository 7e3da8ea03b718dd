package trail

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

var t0 = time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)

func seen(room, ev, verdict, kind string) messages.SeenEvent {
	return messages.SeenEvent{Room: room, EventID: ev, Sender: "@u:hs", Kind: kind, Verdict: verdict}
}

// TestOutcomes follows events from the sync's verdict through the room's
// journal events to their outcome.
func TestOutcomes(t *testing.T) {
	tr := New(20, nil)
	tr.Synced(&messages.SyncBatch{Seen: []messages.SeenEvent{
		seen("!r", "$plain", "not_addressed", "text"),
		seen("!r", "$notice", "not_text_message", "notice"),
		seen("!r", "$image", "not_text_message", "image"),
		seen("!r", "$own", "own_event", "text"),
		seen("!r", "$edit", "edit", "edit"),
		seen("!r", "$old", "baseline", "text"),
		seen("!r", "$bad", "reply_target_invalid", "text"),
		seen("!r", "$ask", "mention", "text"),
		seen("!r", "$fail", "mention", "text"),
		seen("!r", "$flood", "alias", "text"),
		seen("!r", "$gone", "mention", "text"),
		seen("!r", "$held", "mention", "text"),
		seen("!r", "$late", "mention", "text"),
		seen("!r", "$stale", "mention", "text"),
	}}, t0)
	cand := func(ev string) *roompb.Candidate { return &roompb.Candidate{EventId: ev, Sender: "@u:hs"} }
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, ev := range []string{"$ask", "$fail", "$gone", "$held", "$late", "$stale"} {
		tr.Journaled("!r", &roompb.InvocationQueued{Candidate: cand(ev)}, at(0))
	}
	tr.Journaled("!r", &roompb.InvocationRefused{Candidate: cand("$flood"), Reason: "sender_rate"}, at(0))
	tr.Journaled("!r", &roompb.InvocationStarted{EventId: "$ask", Attempt: 1}, at(1))
	tr.Attempted("!r", "$ask", 1, messages.AttemptStats{LLMRequests: 2, Tools: map[string]int{"ok": 1, "fetch_timeout": 1}}, "", at(3))
	tr.Journaled("!r", &roompb.ReplyReady{EventId: "$ask"}, at(3))
	tr.Journaled("!r", &roompb.ReplySent{EventId: "$ask", ReplyEventId: "$reply"}, at(4))
	for a := uint32(1); a <= 2; a++ {
		tr.Journaled("!r", &roompb.InvocationStarted{EventId: "$fail", Attempt: a}, at(5))
		tr.Attempted("!r", "$fail", a, messages.AttemptStats{LLMRequests: 1}, "llm_unavailable", at(6))
		tr.Journaled("!r", &roompb.InvocationFailed{EventId: "$fail", Attempt: a, Code: "llm_unavailable"}, at(6))
	}
	tr.Journaled("!r", &roompb.ReplyReady{EventId: "$fail", IsError: true}, at(7))
	tr.Journaled("!r", &roompb.ReplySent{EventId: "$fail", ReplyEventId: "$sorry"}, at(8))
	tr.Journaled("!r", &roompb.InvocationRedacted{EventId: "$gone"}, at(9))
	// Replies refused with M_FORBIDDEN: one still held, one released and
	// sent, one dropped after 24 h.
	for _, ev := range []string{"$held", "$late", "$stale"} {
		tr.Journaled("!r", &roompb.ReplyReady{EventId: ev}, at(10))
		tr.Journaled("!r", &roompb.ReplyForbidden{EventId: ev, Code: "M_FORBIDDEN"}, at(10))
	}
	tr.Journaled("!r", &roompb.HeldReleased{EventIds: []string{"$late"}, Reason: "power_levels"}, at(11))
	tr.Journaled("!r", &roompb.ReplySent{EventId: "$late", ReplyEventId: "$after"}, at(12))
	tr.Journaled("!r", &roompb.HeldDropped{EventId: "$stale", Reason: "expired"}, at(13))

	want := map[string]Outcome{
		"$plain": NotAddressed, "$notice": Notice, "$image": NotText, "$own": OwnEvent, "$edit": Edit,
		"$old": BeforeBaseline, "$bad": ReplyTargetInvalid, "$ask": Answered, "$fail": "failed:llm_unavailable",
		"$flood": RefusedSenderRate, "$gone": Redacted,
		"$held": Held, "$late": Answered, "$stale": "failed:held_expired",
	}
	for ev, o := range want {
		e, ok := tr.Why(ev)
		if !ok || e.Outcome != o {
			t.Errorf("%s: outcome %q (found %v), want %q", ev, e.Outcome, ok, o)
		}
	}
	ask, _ := tr.Why("$ask")
	if ask.End == nil || ask.End.ReplyEventID != "$reply" || ask.End.AnswerMs != 4000 || ask.End.LLMRequests != 2 ||
		ask.End.ToolCalls["ok"] != 1 || ask.End.ToolCalls["fetch_timeout"] != 1 || ask.End.ErrorCode != "" {
		t.Errorf("answered end = %+v", ask.End)
	}
	var path []string
	for _, s := range ask.Path {
		path = append(path, s.What)
	}
	if got := strings.Join(path, ","); got != "queued,started,attempt_answered,reply_ready,reply_sent" {
		t.Errorf("path = %s", got)
	}
	fail, _ := tr.Why("$fail")
	if fail.End == nil || fail.End.ErrorCode != "llm_unavailable" || fail.End.LLMRequests != 2 || fail.End.ReplyEventID != "$sorry" {
		t.Errorf("failed end = %+v", fail.End)
	}
	if _, ok := tr.Why("$never"); ok {
		t.Error("an event never seen was found")
	}
}

// TestRingIsBounded: a room keeps its newest entries only, and an idle
// room has no ring at all.
func TestRingIsBounded(t *testing.T) {
	tr := New(5, nil)
	if tr.Rooms() != 0 {
		t.Fatal("a new trail holds rooms")
	}
	for i := range 12 {
		tr.Synced(&messages.SyncBatch{Seen: []messages.SeenEvent{seen("!r", fmt.Sprintf("$e%d", i), "not_addressed", "text")}}, t0.Add(time.Duration(i)*time.Second))
	}
	got := tr.Recent("!r", 100)
	if len(got) != 5 || got[0].EventID != "$e11" || got[4].EventID != "$e7" {
		t.Fatalf("recent = %+v", got)
	}
	if _, ok := tr.Why("$e6"); ok {
		t.Error("an entry pushed out of the ring is still found")
	}
	if n := len(tr.Recent("!other", 10)); n != 0 || tr.Rooms() != 1 {
		t.Errorf("an idle room has entries (%d) or a ring (rooms %d)", n, tr.Rooms())
	}
}

// TestNotAllowedWarnsOncePerRoom: events of rooms that are not allowed
// are counted per room; the warning names the key to change, once.
func TestNotAllowedWarnsOncePerRoom(t *testing.T) {
	var buf bytes.Buffer
	tr := New(5, slog.New(slog.NewJSONHandler(&buf, nil)))
	for range 3 {
		tr.Synced(&messages.SyncBatch{NotAllowed: map[string]int{"!a:hs": 2, "!b:hs": 1}}, t0)
	}
	counts, other := tr.NotAllowed()
	if counts["!a:hs"] != 6 || counts["!b:hs"] != 3 || other != 0 {
		t.Errorf("counts = %v, other %d", counts, other)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want one per room:\n%s", len(lines), buf.String())
	}
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["level"] != "WARN" || !strings.Contains(rec["msg"].(string), "matrix.allowed_room_ids") || strings.Contains(l, "!a:hs") {
			t.Errorf("warning %s: want WARN naming matrix.allowed_room_ids, room hashed", l)
		}
	}
	if tr.Rooms() != 0 {
		t.Error("a room that is not allowed got a ring")
	}
}

// TestUnknownVerdictStaysInTheSet: FromVerdict never returns a code
// outside the documented set.
func TestUnknownVerdictStaysInTheSet(t *testing.T) {
	known := map[Outcome]bool{}
	for _, o := range Outcomes {
		known[o] = true
	}
	for _, v := range []string{"mention", "brand_new_verdict", "not_text_message", "", "baseline"} {
		for _, k := range []string{"text", "notice", "other", ""} {
			if o := FromVerdict(v, k); !known[o] {
				t.Errorf("FromVerdict(%q, %q) = %q, outside the set", v, k, o)
			}
		}
	}
}

// TestRefusedBudgetOutcome: a question the room drops for budget reads
// refused_budget in the trail; a redacted one that is dropped stays
// redacted.
func TestRefusedBudgetOutcome(t *testing.T) {
	tr := New(10, nil)
	now := time.UnixMilli(1_700_000_000_000)
	for _, ev := range []string{"$budget", "$redacted"} {
		tr.Journaled("!r:hs", &roompb.InvocationQueued{Candidate: &roompb.Candidate{RoomId: "!r:hs", EventId: ev, Sender: "@u:hs", Trigger: "mention"}}, now)
	}
	tr.Journaled("!r:hs", &roompb.InvocationDropped{EventId: "$budget", Code: "refused_budget"}, now)
	tr.Journaled("!r:hs", &roompb.InvocationDropped{EventId: "$redacted"}, now)
	for ev, want := range map[string]Outcome{"$budget": RefusedBudget, "$redacted": Redacted} {
		en, ok := tr.Why(ev)
		if !ok || en.Outcome != want {
			t.Errorf("%s: %+v (found %v), want outcome %s", ev, en, ok, want)
		}
	}
}

// TestSendWaitsAreShown: a reply send refused for a rate limit shows on
// the path with the wait the homeserver asked for, then the send.
func TestSendWaitsAreShown(t *testing.T) {
	tr := New(20, nil)
	tr.Synced(&messages.SyncBatch{Seen: []messages.SeenEvent{seen("!r", "$ask", "mention", "text")}}, t0)
	tr.Journaled("!r", &roompb.InvocationQueued{Candidate: &roompb.Candidate{EventId: "$ask", Sender: "@u:hs"}}, t0)
	tr.Journaled("!r", &roompb.ReplyReady{EventId: "$ask"}, t0.Add(time.Second))
	tr.SendFailed("!r", "$ask", "matrix_rate_limited", 4500*time.Millisecond, t0.Add(2*time.Second))
	e, _ := tr.Why("$ask")
	if last := e.Path[len(e.Path)-1]; last.What != StepSendFailed || last.Code != "matrix_rate_limited" || last.WaitMs != 4500 || e.Outcome != Invoked {
		t.Fatalf("after a 429: outcome %s, last step %+v", e.Outcome, last)
	}
	tr.Journaled("!r", &roompb.ReplySent{EventId: "$ask", ReplyEventId: "$reply"}, t0.Add(7*time.Second))
	if e, _ := tr.Why("$ask"); e.Outcome != Answered || e.Path[len(e.Path)-2].What != StepSendFailed {
		t.Fatalf("after the send: %+v", e)
	}
}
