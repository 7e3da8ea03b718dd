package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/devkit/demo"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// Threads, edits, redactions and the wait reaction (#17 items 1, 3, 4, 5)
// against each real homeserver: what a member does in Element, what Lisa does.

// inThread is a message in the thread of root. With fallback, its
// m.in_reply_to is the thread fallback that clients without threads
// show (is_falling_back); otherwise it is a real reply to replyTo.
func inThread(body string, root, replyTo id.EventID, fallback, mention bool, bot string) *event.MessageEventContent {
	c := &event.MessageEventContent{MsgType: event.MsgText, Body: body, RelatesTo: &event.RelatesTo{
		Type: event.RelThread, EventID: root, InReplyTo: &event.InReplyTo{EventID: replyTo}, IsFallingBack: fallback,
	}}
	if mention {
		c.Mentions = &event.Mentions{UserIDs: []id.UserID{id.UserID(bot)}}
	}
	return c
}

// edit is an edit (m.replace) of orig with the new text body.
func edit(orig id.EventID, body string, mention bool, bot string) *event.MessageEventContent {
	nc := &event.MessageEventContent{MsgType: event.MsgText, Body: body}
	if mention {
		nc.Mentions = &event.Mentions{UserIDs: []id.UserID{id.UserID(bot)}}
	}
	return &event.MessageEventContent{MsgType: event.MsgText, Body: "* " + body, NewContent: nc,
		RelatesTo: &event.RelatesTo{Type: event.RelReplace, EventID: orig}}
}

// busyRoom starts Lisa and keeps room busy: a first question is held at
// the model until gate is released (at the end of the test at the
// latest), so what follows waits in the room's queue.
func (e *e2e) busyRoom(room id.RoomID) (*lisaProc, id.EventID, *llmfake.Gate) {
	e.t.Helper()
	gate := llmfake.NewGate()
	e.t.Cleanup(gate.Release)
	e.llm.Enqueue(llmfake.Answer("first, done").Until(gate))
	p := e.start()
	e.awaitLog(p, "sync baseline recorded")
	busy := e.mention(room, "keep busy for a moment")
	if err := e.llm.WaitForInFlight(e.ctx, 1); err != nil {
		e.t.Fatal(err)
	}
	return p, busy, gate
}

// requestFor returns the text of the last LLM request whose invoking
// message contains marker.
func (e *e2e) requestFor(marker string) string {
	e.t.Helper()
	reqs := e.llm.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if strings.Contains(demo.InvocationText(reqs[i].LastUser()), marker) {
			raw, _ := json.Marshal(reqs[i])
			return string(raw)
		}
	}
	e.t.Fatalf("no LLM request for %q", marker)
	return ""
}

// TestThreadsAnsweredInThread: a mention inside a thread is answered in
// that thread, with the thread as context; a real reply to Lisa inside a
// thread invokes her, the thread fallback pointing at her does not; the
// main timeline's context leaves thread messages out.
func TestThreadsAnsweredInThread(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		room := e.allowed[0]
		p := e.start()
		e.awaitLog(p, "sync baseline recorded")

		e.say(room, plainText("MAINLINE-CANARY: the main timeline talks about the weather"))
		root := e.say(room, plainText("Thread root: who brings the cake on Saturday?"))
		e.say(room, inThread("THREAD-CANARY: Bob brings the cake", root, root, true, false, e.bot.UserID))
		q := e.say(room, inThread("Lisa, who brings the cake? (thread question)", root, root, true, true, e.bot.UserID))
		e.awaitReply(room, q)

		c := e.replyContent(room, q)
		rel, _ := c["m.relates_to"].(map[string]any)
		irt, _ := rel["m.in_reply_to"].(map[string]any)
		if rel["rel_type"] != "m.thread" || rel["event_id"] != string(root) || rel["is_falling_back"] != false || irt["event_id"] != string(q) {
			t.Fatalf("thread reply relates_to = %#v", rel)
		}
		req := e.requestFor("thread question")
		if !strings.Contains(req, "THREAD-CANARY") || !strings.Contains(req, "who brings the cake on Saturday") {
			t.Errorf("the thread question's context lacks the thread:\n%s", req)
		}
		if strings.Contains(req, "MAINLINE-CANARY") {
			t.Errorf("the thread question's context holds the main timeline:\n%s", req)
		}
		// Prompt facts (#17 item 6): the room's name from its state, and the
		// date in UTC.
		if !strings.Contains(req, "room 0") || !strings.Contains(req, "UTC") {
			t.Errorf("the request lacks the room's name or the date:\n%s", req)
		}

		reply := e.replyEventTo(room, q)
		fb := e.say(room, inThread("thanks (fallback only)", root, reply, true, false, e.bot.UserID))
		real := e.say(room, inThread("and who brings the candles? (real reply)", root, reply, false, false, e.bot.UserID))
		e.awaitReply(room, real)
		if rel, _ := e.replyContent(room, real)["m.relates_to"].(map[string]any); rel["rel_type"] != "m.thread" || rel["event_id"] != string(root) {
			t.Errorf("reply to a reply in the thread left the thread: %#v", rel)
		}

		main := e.mention(room, "and on the main timeline? (main question)")
		e.awaitReply(room, main)
		if req := e.requestFor("main question"); strings.Contains(req, "THREAD-CANARY") {
			t.Errorf("the main timeline's context holds thread messages:\n%s", req)
		}
		if rel, _ := e.replyContent(room, main)["m.relates_to"].(map[string]any); rel["rel_type"] != nil {
			t.Errorf("main timeline reply has rel_type %v", rel["rel_type"])
		}
		s := e.settle(room)
		e.expectReplies(room, map[id.EventID]int{q: 1, real: 1, main: 1, s: 1, fb: 0})
	})
}

// TestEditsBeforeTheAnswer: a question edited before Lisa starts on it is
// answered in its new wording, once, as a reply to the original message;
// another member's edit does not count; edits after the answer change
// nothing.
func TestEditsBeforeTheAnswer(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		room := e.allowed[0]
		p, busy, gate := e.busyRoom(room)
		asked := e.mention(room, "ORIGINAL-WORDING what time is it?")
		e.say(room, edit(asked, "EDITED-WORDING what day is it?", true, e.bot.UserID))
		e.awaitLogLine(p, `"transition":"InvocationEdited"`)
		gate.Release()

		e.awaitReply(room, asked)
		if body, _ := e.replyContent(room, asked)["body"].(string); !strings.Contains(body, "answer: EDITED-WORDING") {
			t.Errorf("answer to the edited question = %q", body)
		}

		// After the answer, edits change nothing.
		e.say(room, edit(asked, "EDITED-AGAIN too late", true, e.bot.UserID))
		s := e.settle(room)
		e.expectReplies(room, map[id.EventID]int{busy: 1, asked: 1, s: 1})
		for _, r := range e.llm.Requests() {
			if strings.Contains(demo.InvocationText(r.LastUser()), "EDITED-AGAIN") || strings.Contains(demo.InvocationText(r.LastUser()), "ORIGINAL-WORDING") {
				t.Errorf("an LLM request answered %q", demo.InvocationText(r.LastUser()))
			}
		}
	})
}

// TestEditNeverInvokes: an edit that makes a message address Lisa (a
// mention, an alias) is no invocation: for 10 s after it Lisa shows
// nothing in the room (no reply, no wait reaction although it is due
// after 1 s, no typing), and the model never sees it. A sentinel asked
// afterwards is answered, so she was reading the room all along; the
// edited message still has no reply then (a room answers in order).
func TestEditNeverInvokes(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		room := e.allowed[0]
		e.extraConfig = "wait_reaction = \"⏳\"\nwait_reaction_seconds = 1\n"
		p := e.start()
		e.awaitLog(p, "sync baseline recorded")

		since := e.humanSince()
		chatter := e.say(room, plainText("just chatting among humans"))
		aliased := e.say(room, plainText("more chatter"))
		e.say(room, edit(chatter, "NEWLY-MENTIONED can you help?", true, e.bot.UserID))
		e.say(room, edit(aliased, "Lisa, NEWLY-ALIASED can you help?", false, e.bot.UserID))

		if seen := e.lisaActivity(room, since, 10*time.Second); len(seen) > 0 {
			t.Fatalf("Lisa answered an edit: %v; logs:\n%s", seen, p.text())
		}
		s := e.settle(room)
		e.expectReplies(room, map[id.EventID]int{s: 1})
		for key := range e.lisaReactions(room) {
			if key[0] == string(chatter) || key[0] == string(aliased) {
				t.Errorf("Lisa reacted %q to an edited message", key[1])
			}
		}
		for _, r := range e.llm.Requests() {
			if u := demo.InvocationText(r.LastUser()); strings.Contains(u, "NEWLY-") {
				t.Errorf("an LLM request answered %q", u)
			}
		}
	})
}

// humanSince returns the human's current /sync position.
func (e *e2e) humanSince() string {
	e.t.Helper()
	resp, err := e.human.FullSyncRequest(e.ctx, mautrix.ReqSync{})
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.NextBatch
}

// lisaActivity watches the human's /sync from since for window and
// returns what Lisa did in room meanwhile: her timeline events (messages,
// reactions, redactions) by type, and "typing" if she was shown typing.
// The whole window is watched: an empty result means nothing came within
// it.
func (e *e2e) lisaActivity(room id.RoomID, since string, window time.Duration) []string {
	e.t.Helper()
	var seen []string
	for end := time.Now().Add(window); time.Now().Before(end); {
		timeout := min(time.Until(end), time.Second).Milliseconds()
		resp, err := e.human.FullSyncRequest(e.ctx, mautrix.ReqSync{Since: since, Timeout: int(max(timeout, 1))})
		if err != nil {
			e.t.Fatal(err)
		}
		since = resp.NextBatch
		jr := resp.Rooms.Join[room]
		if jr == nil {
			continue
		}
		for _, evt := range jr.Timeline.Events {
			if string(evt.Sender) == e.bot.UserID {
				seen = append(seen, evt.Type.Type+" "+string(evt.ID))
			}
		}
		for _, evt := range jr.Ephemeral.Events {
			if evt.Type != event.EphemeralEventTyping {
				continue
			}
			_ = evt.Content.ParseRaw(evt.Type)
			for _, u := range evt.Content.AsTyping().UserIDs {
				if string(u) == e.bot.UserID {
					seen = append(seen, "typing")
				}
			}
		}
	}
	return seen
}

// awaitLogLine waits until a line of Lisa's log contains s.
func (e *e2e) awaitLogLine(p *lisaProc, s string) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(p.text(), s) {
		if time.Now().After(deadline) {
			e.t.Fatalf("no log line with %q; logs:\n%s", s, p.text())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRedactions: a question redacted before Lisa answers is never
// answered (nor sent to the model); redacting a question she answered
// makes her redact her reply.
func TestRedactions(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		room := e.allowed[0]
		p, busy, gate := e.busyRoom(room)
		withdrawn := e.mention(room, "WITHDRAWN-QUESTION never mind")
		if _, err := e.human.RedactEvent(e.ctx, room, withdrawn); err != nil {
			t.Fatal(err)
		}
		e.awaitLogLine(p, `"transition":"InvocationRedacted"`)
		gate.Release()

		regret := e.mention(room, "answer this, then I regret it")
		e.awaitReply(room, regret)
		reply := e.replyEventTo(room, regret)
		if _, err := e.human.RedactEvent(e.ctx, room, regret); err != nil {
			t.Fatal(err)
		}
		e.awaitRedacted(room, reply)

		s := e.settle(room)
		got := e.replies(room)
		if got[busy] != 1 || got[withdrawn] != 0 || got[s] != 1 {
			t.Errorf("replies = %v; want busy and sentinel once, the withdrawn question never", got)
		}
		for _, r := range e.llm.Requests() {
			if strings.Contains(demo.InvocationText(r.LastUser()), "WITHDRAWN-QUESTION") {
				t.Error("the withdrawn question reached the model")
			}
			if strings.Contains(r.LastUser(), "WITHDRAWN-QUESTION") {
				t.Error("the withdrawn question entered a context")
			}
		}
	})
}

// awaitRedacted waits until ev in room is redacted.
func (e *e2e) awaitRedacted(room id.RoomID, ev id.EventID) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		evt, err := e.human.GetEvent(e.ctx, room, ev)
		if err != nil {
			e.t.Fatal(err)
		}
		if evt.Unsigned.RedactedBecause != nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s was never redacted; logs:\n%s", ev, e.proc.text())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lisaReactions returns Lisa's reactions in room: the reaction's event ID
// per (target event, key).
func (e *e2e) lisaReactions(room id.RoomID) map[[2]string]id.EventID {
	e.t.Helper()
	resp, err := e.human.Messages(e.ctx, room, "", "", mautrix.DirectionBackward, &mautrix.FilterPart{Types: []event.Type{event.EventReaction}}, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[[2]string]id.EventID{}
	for _, evt := range resp.Chunk {
		if string(evt.Sender) != e.bot.UserID {
			continue
		}
		var c struct {
			Rel struct {
				EventID string `json:"event_id"`
				Key     string `json:"key"`
			} `json:"m.relates_to"`
		}
		_ = json.Unmarshal(evt.Content.VeryRaw, &c)
		out[[2]string{c.Rel.EventID, c.Rel.Key}] = evt.ID
	}
	return out
}

// TestWaitReaction: a question whose answer is pending longer than
// runtime.wait_reaction_seconds (a slow model, or waiting behind another
// question) gets Lisa's reaction, which she removes when she answers; a
// quick answer gets none. No extra message is sent.
func TestWaitReaction(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		room := e.allowed[0]
		e.extraConfig = "wait_reaction = \"⏳\"\nwait_reaction_seconds = 1\n"
		gate := llmfake.NewGate()
		defer gate.Release()
		e.llm.Enqueue(llmfake.Answer("slow, done").Until(gate))
		p := e.start()
		e.awaitLog(p, "sync baseline recorded")

		slow := e.mention(room, "a slow one")
		waiting := e.mention(room, "waiting behind it")
		var reactions map[[2]string]id.EventID
		deadline := time.Now().Add(30 * time.Second)
		for {
			reactions = e.lisaReactions(room)
			if reactions[[2]string{string(slow), "⏳"}] != "" && reactions[[2]string{string(waiting), "⏳"}] != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("reactions = %v; logs:\n%s", reactions, p.text())
			}
			time.Sleep(100 * time.Millisecond)
		}
		gate.Release()
		e.awaitReply(room, slow)
		e.awaitReply(room, waiting)
		e.awaitRedacted(room, reactions[[2]string{string(slow), "⏳"}])
		e.awaitRedacted(room, reactions[[2]string{string(waiting), "⏳"}])

		quick := e.mention(room, "a quick one")
		e.awaitReply(room, quick)
		s := e.settle(room)
		if r := e.lisaReactions(room)[[2]string{string(quick), "⏳"}]; r != "" {
			t.Errorf("a quick answer got a reaction %s", r)
		}
		e.expectReplies(room, map[id.EventID]int{slow: 1, waiting: 1, quick: 1, s: 1})
	})
}
