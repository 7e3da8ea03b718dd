package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	roomactor "github.com/lisabot/lisa/actors/room"
	"github.com/lisabot/lisa/devkit/demo"
	"github.com/lisabot/lisa/testkit/faultproxy"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// The relations gaps of issue #31 item 4 against each real homeserver: what a
// redaction, a flood or a kill leaves standing of Lisa's must still be
// cleaned up. One overload notice per burst with edits in it is proved by
// TestFloodGetsOneOverloadReply (cmd/lisa/hostile_e2e_test.go).

// lisaClient is a client with Lisa's own account: a test uses it to put
// on the homeserver what a run of Lisa's could have left there.
func (e *e2e) lisaClient() *mautrix.Client {
	e.t.Helper()
	cli, err := mautrix.NewClient(e.hs.URL(), id.UserID(e.bot.UserID), e.bot.AccessToken)
	if err != nil {
		e.t.Fatal(err)
	}
	return cli
}

// lisaMessages counts Lisa's m.room.message events in room, redacted
// ones included: a reply sent twice shows here even if one was redacted.
func (e *e2e) lisaMessages(room id.RoomID) int {
	e.t.Helper()
	return len(e.lisaEvents(room))
}

// lisaBodies returns the bodies of Lisa's messages in room, newest first.
func (e *e2e) lisaBodies(room id.RoomID) []string {
	e.t.Helper()
	resp, err := e.human.Messages(e.ctx, room, "", "", mautrix.DirectionBackward,
		&mautrix.FilterPart{Types: []event.Type{event.EventMessage}, Senders: []id.UserID{id.UserID(e.bot.UserID)}}, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, evt := range resp.Chunk {
		if string(evt.Sender) != e.bot.UserID {
			continue
		}
		_ = evt.Content.ParseRaw(evt.Type)
		if msg := evt.Content.AsMessage(); msg != nil {
			out = append(out, msg.Body)
		}
	}
	return out
}

// failingLookups makes every lookup of Lisa's own events (GET /messages
// filtered by sender, as FindReply and FindReactions read) fail with 500
// until proxy.Clear; the /sync and room reads pass.
func failingLookups(proxy *faultproxy.Proxy, bot string) {
	faults := make([]faultproxy.Fault, 10_000)
	for i := range faults {
		faults[i] = faultproxy.Fault{Status: 500, Body: `{"errcode":"M_UNKNOWN","error":"injected"}`}
	}
	proxy.Add(faultproxy.Rule{Method: "GET", PathContains: "/messages", QueryContains: `"senders":["` + bot + `"]`, Faults: faults})
}

// TestRedactionDuringRecoveryLookup: Lisa dies while answering; her reply
// reached the homeserver but its record did not reach her disk (what a
// power cut can leave: the reply is sent before ReplyReady is synced). The
// restarted room looks the reply up before anything else, and the lookup
// keeps failing; meanwhile the member redacts the question. Once the
// lookup works again the reply it finds is redacted, and no second reply
// is ever sent.
func TestRedactionDuringRecoveryLookup(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		room := e.allowed[0]
		gate := llmfake.NewGate()
		defer gate.Release()
		e.llm.Enqueue(llmfake.Answer("never delivered").Until(gate))
		p := e.start()
		e.awaitLog(p, "sync baseline recorded")
		q := e.mention(room, "REDACTED-WHILE-LOOKED-UP what is the time?")
		if err := e.llm.WaitForInFlight(e.ctx, 1); err != nil {
			t.Fatal(err)
		}
		p.kill() // the attempt started: its reply may be out, as far as the journal knows
		resp, err := e.lisaClient().SendMessageEvent(e.ctx, room, event.EventMessage, &event.MessageEventContent{
			MsgType: event.MsgText, Body: "an answer sent just before the power went",
			RelatesTo: &event.RelatesTo{InReplyTo: &event.InReplyTo{EventID: q}},
		}, mautrix.ReqSendEvent{TransactionID: "test_early_reply"})
		if err != nil {
			t.Fatal(err)
		}
		reply := resp.EventID

		proxy := faultproxy.Start(t, e.hs.URL())
		failingLookups(proxy, e.bot.UserID)
		e.hsURL = proxy.URL()
		p2 := e.start()
		for deadline := time.Now().Add(60 * time.Second); proxy.Applied() < 3; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the restarted room never looked its reply up; logs:\n%s", p2.text())
			}
		}
		if _, err := e.human.RedactEvent(e.ctx, room, q); err != nil {
			t.Fatal(err)
		}
		e.awaitLogLine(p2, `"transition":"InvocationRedacted"`)
		proxy.Clear()
		e.awaitRedacted(room, reply)
		if !strings.Contains(p2.text(), `"reply_may_exist":true`) {
			t.Error("the redaction was not taken as one of a question whose reply may be out")
		}

		s := e.settle(room)
		if got := e.replies(room); got[q] != 0 || got[s] != 1 {
			t.Errorf("replies = %v; want none left to the redacted question, one to the sentinel", got)
		}
		if n := e.lisaMessages(room); n != 2 {
			t.Errorf("Lisa has %d messages in the room, want 2 (the redacted early reply and the sentinel's answer)", n)
		}
		asked := 0
		for _, r := range e.llm.Requests() {
			if strings.Contains(demo.InvocationText(r.LastUser()), "REDACTED-WHILE-LOOKED-UP") {
				asked++
			}
		}
		if asked != 1 {
			t.Errorf("the redacted question reached the model %d times, want once (before the kill)", asked)
		}
	})
}

// TestRedactionOfAnswerBeyondMemory: a question answered before the last
// roomactor.RecentLimit answers (the room no longer remembers its reply) is
// redacted: Lisa finds her reply on the homeserver and redacts it.
func TestRedactionOfAnswerBeyondMemory(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		e.extraConfig = "room_queue_limit = 1000\nsender_rate_limit = 0\nwait_reaction_seconds = 3600\n"
		room := e.allowed[0]
		p := e.start()
		e.awaitLog(p, "sync baseline recorded")
		first := e.mention(room, "the first question, answered long ago")
		e.awaitReply(room, first)
		reply := e.replyEventTo(room, first)
		start := time.Now()
		for i := range roomactor.RecentLimit {
			e.mention(room, fmt.Sprintf("question %d", i))
		}
		s := e.settle(room) // answered in order: every question before it is answered
		t.Logf("%d more questions answered in %v", roomactor.RecentLimit+1, time.Since(start).Round(time.Millisecond))

		if _, err := e.human.RedactEvent(e.ctx, room, first); err != nil {
			t.Fatal(err)
		}
		e.awaitRedacted(room, reply)
		if !strings.Contains(p.text(), `"find_reply":true`) {
			t.Error("the reply was not looked up on the homeserver")
		}
		if got := e.replies(room)[s]; got != 1 {
			t.Errorf("sentinel replies = %d, want 1", got)
		}
	})
}

// TestWaitReactionBeforeKillAndHomeserverRestart: the wait reaction reaches
// the homeserver but its response is lost, then Lisa is killed and the
// homeserver restarts (forgetting transaction IDs). The restarted Lisa does
// not put a second one; when she answers she finds the one she never
// heard back about and redacts it, so no ⏳ of hers is left standing.
func TestWaitReactionBeforeKillAndHomeserverRestart(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		room := e.allowed[0]
		e.extraConfig = "wait_reaction = \"⏳\"\nwait_reaction_seconds = 1\n"
		gate := llmfake.NewGate()
		defer gate.Release()
		e.llm.Enqueue(llmfake.Answer("slow, never delivered").Until(gate))
		proxy := faultproxy.Start(t, e.hs.URL())
		proxy.Add(faultproxy.Rule{Method: "PUT", PathContains: "/send/m.reaction/", Faults: []faultproxy.Fault{
			{Status: 502, Body: `{"errcode":"M_UNKNOWN","error":"bad gateway"}`, Forward: true},
		}})
		e.hsURL = proxy.URL()
		p := e.start()
		e.awaitLog(p, "sync baseline recorded")
		q := e.mention(room, "a slow question")

		key := [2]string{string(q), "⏳"}
		var reaction id.EventID
		for deadline := time.Now().Add(30 * time.Second); reaction == ""; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the wait reaction never reached the homeserver; logs:\n%s", p.text())
			}
			reaction = e.lisaReactions(room)[key]
		}
		e.awaitLogLine(p, `"msg":"wait reaction failed"`)
		p.kill()
		if err := e.hs.Restart(e.ctx); err != nil {
			t.Fatal(err)
		}
		e.hsURL = e.hs.URL()
		e.start()
		e.awaitReply(room, q)
		e.awaitRedacted(room, reaction)
		s := e.settle(room)
		if r := e.lisaReactions(room)[key]; r != "" {
			t.Errorf("a wait reaction of Lisa's is still standing on the answered question: %s", r)
		}
		if n := e.lisaReactionEvents(room); n != 1 {
			t.Errorf("Lisa put %d reactions, want 1 (never a second after the restart)", n)
		}
		e.expectReplies(room, map[id.EventID]int{q: 1, s: 1})
	})
}

// lisaReactionEvents counts Lisa's m.reaction events in room, redacted
// ones included.
func (e *e2e) lisaReactionEvents(room id.RoomID) int {
	e.t.Helper()
	resp, err := e.human.Messages(e.ctx, room, "", "", mautrix.DirectionBackward,
		&mautrix.FilterPart{Types: []event.Type{event.EventReaction}, Senders: []id.UserID{id.UserID(e.bot.UserID)}}, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, evt := range resp.Chunk {
		if string(evt.Sender) == e.bot.UserID {
			n++
		}
	}
	return n
}
