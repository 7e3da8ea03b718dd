package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/daemon"
	"github.com/lisabot/lisa/devkit/demo"
	"github.com/lisabot/lisa/testkit/llmfake"
	"github.com/lisabot/lisa/trail"
)

// why asks the running daemon about one event (lisa shell --json).
func (e *e2e) why(ev id.EventID) daemon.WhyReport {
	e.t.Helper()
	out := e.shell("why "+string(ev)+"\n", "--json")
	var r daemon.WhyReport
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); err != nil {
		e.t.Fatalf("why %s: output %q: %v", ev, out, err)
	}
	return r
}

// awaitOutcome waits until why reports a final outcome for ev and returns
// the report.
func (e *e2e) awaitOutcome(ev id.EventID) daemon.WhyReport {
	e.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		r := e.why(ev)
		if r.Seen && r.Entry.Outcome.Final() {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no final outcome for %s (last answer %+v); logs:\n%s", ev, r, e.proc.text())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// replyTo returns the event ID of Lisa's reply to ev that the homeserver
// holds ("" if none).
func (e *e2e) replyTo(room id.RoomID, ev id.EventID) id.EventID {
	e.t.Helper()
	resp, err := e.human.Messages(e.ctx, room, "", "", mautrix.DirectionBackward, &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, evt := range resp.Chunk {
		if string(evt.Sender) == e.bot.UserID && inReplyTo(evt) == ev {
			return evt.ID
		}
	}
	return ""
}

// TestWhyReportsEveryOutcome sends, against each homeserver, an event of each
// outcome and asks `why` about each: before the baseline, answered (with
// the reply event ID the homeserver holds), not addressed, an edit, a
// notice, Lisa's own reply, a flood refusal, a redacted question, a
// failing model; an event of a room that is not allowed is never seen,
// and `why` says so with the hint.
func TestWhyReportsEveryOutcome(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		e.extraConfig = "sender_rate_limit = 3\nsender_rate_window_seconds = 600\nwait_reaction = \"\"\n"
		e.llm = llmfake.Start(t, llmfake.WithModels("m"), llmfake.WithDefault(llmfake.Func(func(r llmfake.Request) llmfake.Step {
			if strings.Contains(demo.InvocationText(r.LastUser()), "FAILME") {
				return llmfake.Error(400, "the model refuses this one")
			}
			if strings.Contains(demo.InvocationText(r.LastUser()), "never mind") {
				// The model never answers the question that is redacted, so
				// only the redaction can end it, whether it reaches Lisa
				// before or during the invocation; an answer would race it.
				return llmfake.Hang()
			}
			return llmfake.Answer("answer: " + demo.InvocationText(r.LastUser()))
		})))
		room := e.allowed[0]
		old := e.mention(room, "Lisa, this is history")
		p := e.start()
		e.awaitLog(p, "sync baseline recorded")

		asked := e.mention(room, "Lisa, what is two and two?")
		chatter := e.say(room, plainText("just chatting among ourselves"))
		edit := e.say(room, &event.MessageEventContent{MsgType: event.MsgText, Body: "* Lisa, edited in",
			NewContent: &event.MessageEventContent{MsgType: event.MsgText, Body: "Lisa, edited in",
				Mentions: &event.Mentions{UserIDs: []id.UserID{id.UserID(e.bot.UserID)}}},
			RelatesTo: &event.RelatesTo{Type: event.RelReplace, EventID: chatter}})
		notice := e.say(room, &event.MessageEventContent{MsgType: event.MsgNotice, Body: "Lisa, a bot's notice",
			Mentions: &event.Mentions{UserIDs: []id.UserID{id.UserID(e.bot.UserID)}}})
		failing := e.mention(room, "Lisa, FAILME please")
		e.awaitReply(room, asked)
		gone := e.mention(room, "Lisa, never mind this one")
		if _, err := e.human.RedactEvent(e.ctx, room, gone); err != nil {
			t.Fatal(err)
		}
		// The limit is 3 per sender per window: asked and failing came
		// first, and gone too unless it arrived redacted, so the second of
		// these is refused whatever the timing.
		e.mention(room, "Lisa, and another thing")
		flood := e.mention(room, "Lisa, and one more")
		outside := e.mention(e.other, "Lisa, are you here?")

		r := e.awaitOutcome(asked)
		reply := e.replyTo(room, asked)
		if r.Entry.Outcome != trail.Answered || reply == "" || r.Entry.End == nil || r.Entry.End.ReplyEventID != string(reply) {
			t.Errorf("answered: %+v, end %+v; the homeserver holds reply %q", r.Entry, r.Entry.End, reply)
		}
		if r.Entry.End != nil && (r.Entry.End.LLMRequests < 1 || r.Entry.End.AnswerMs <= 0) {
			t.Errorf("answered: end %+v, want LLM requests and a time to answer", r.Entry.End)
		}
		var path []string
		for _, s := range r.Entry.Path {
			path = append(path, s.What)
		}
		if got := strings.Join(path, ","); !strings.HasPrefix(got, "queued,started,") || !strings.HasSuffix(got, "reply_sent") {
			t.Errorf("answered path = %s", got)
		}

		want := []struct {
			name string
			ev   id.EventID
			o    trail.Outcome
		}{
			{"before the baseline", old, trail.BeforeBaseline},
			{"not addressed", chatter, trail.NotAddressed},
			{"edit", edit, trail.Edit},
			{"notice", notice, trail.Notice},
			{"own reply", reply, trail.OwnEvent},
			{"failing model", failing, trail.Failed("llm_rejected")},
			{"redacted", gone, trail.Redacted},
			{"flood", flood, trail.RefusedSenderRate},
		}
		for _, w := range want {
			if w.ev == "" {
				t.Errorf("%s: no event", w.name)
				continue
			}
			got := e.awaitOutcome(w.ev)
			if got.Entry.Outcome != w.o {
				t.Errorf("%s: why says %q (%s), want %q", w.name, got.Entry.Outcome, got.Meaning, w.o)
			}
		}
		fr := e.why(failing)
		if fr.Entry.End == nil || fr.Entry.End.ErrorCode != "llm_rejected" || fr.Entry.End.ReplyEventID == "" {
			t.Errorf("failing model: end %+v, want the error code and the error reply's ID", fr.Entry.End)
		}

		// Never seen: a room that is not allowed.
		nr := e.why(outside)
		if nr.Seen || len(nr.Hints) == 0 || !strings.Contains(strings.Join(nr.Hints, "\n"), "matrix.allowed_room_ids") {
			t.Errorf("event of a room not allowed: %+v", nr)
		}
		e.awaitLog(p, "not allowed")
		if !strings.Contains(p.text(), "matrix.allowed_room_ids") {
			t.Error("no warning naming matrix.allowed_room_ids")
		}
		// The text forms.
		text := e.shell("why " + string(asked) + "\nwhy $never-seen-event\ntrail 5\ntrail " + string(room) + " 3\n")
		for _, s := range []string{"outcome", "answered", string(reply), "path", "never saw", "wrong room", "OUTCOME"} {
			if !strings.Contains(text, s) {
				t.Errorf("shell text lacks %q:\n%s", s, text)
			}
		}
		var tr daemon.TrailReport
		if err := json.Unmarshal([]byte(strings.TrimSpace(e.shell("trail "+string(room)+" 3\n", "--json"))), &tr); err != nil || len(tr.Entries) != 3 {
			t.Errorf("trail room 3: %+v, %v", tr, err)
		}
		if tr.NotAllowed[string(e.other)] < 1 {
			t.Errorf("trail does not count the room that is not allowed: %v", tr.NotAllowed)
		}
	})
}
