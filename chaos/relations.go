package chaos

import (
	"context"
	"fmt"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// The campaign's traffic beyond plain messages: questions in threads,
// edits of questions and of chatter, redactions of questions. Each keeps
// the invariant checkable: every question still gets exactly one visible
// answer, a redacted question none (a reply sent before the redaction is
// redacted by Lisa), and edits and redactions themselves are never
// answered. An edit is never an invocation: chatter edited so that it
// mentions Lisa stays chatter, and a reply to it counts as unexpected.

// RelationKinds returns the kinds of relation messages a campaign sends
// (see Report.Kinds and Minimums.EachRelation).
func RelationKinds() []string {
	return []string{"thread question", "edit of a question", kindChatterEdited, "redaction of a question"}
}

// kindChatterEdited is the kind of an edit that makes chatter mention
// Lisa: neither the chatter nor the edit may be answered.
const kindChatterEdited = "chatter edited to mention lisa"

// relationsDone reports whether every relation kind was sent at least
// least times.
func (c *campaign) relationsDone(least int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range RelationKinds() {
		if c.rel.kinds[k] < least {
			return false
		}
	}
	return true
}

// relations is the campaign's record of what it can edit or redact.
type relations struct {
	// human holds the human's messages per allowed room (thread roots).
	human map[id.RoomID][]id.EventID
	// plain holds chatter per allowed room that may be edited to mention
	// Lisa (and stays chatter).
	plain map[id.RoomID][]id.EventID
	// redacted holds the questions the human redacted.
	redacted map[id.EventID]id.RoomID
	// kinds counts the messages sent by kind.
	kinds map[string]int
}

func newRelations() relations {
	return relations{human: map[id.RoomID][]id.EventID{}, plain: map[id.RoomID][]id.EventID{},
		redacted: map[id.EventID]id.RoomID{}, kinds: map[string]int{}}
}

// relationMessage sends one message of the relation kinds, chosen by r
// in [0, 100): a question in a thread, an edit of a question, an edit
// that makes chatter mention Lisa (no invocation), or a redaction of a
// question. It
// reports false when the room has nothing to relate to yet.
func (c *campaign) relationMessage(ctx context.Context, room id.RoomID, n, r int) (bool, error) {
	switch {
	case r < 40:
		return c.threadQuestion(ctx, room, n)
	case r < 65:
		return c.editQuestion(ctx, room, n)
	case r < 80:
		return c.editChatter(ctx, room, n)
	default:
		return c.redactQuestion(ctx, room)
	}
}

// pick returns a random element of evs, or "".
func (c *campaign) pick(evs []id.EventID) id.EventID {
	if len(evs) == 0 {
		return ""
	}
	return evs[c.intn(len(evs))]
}

// questionIn returns a random open question of room (not redacted), or "".
func (c *campaign) questionIn(room id.RoomID) id.EventID {
	c.mu.Lock()
	var evs []id.EventID
	for ev, r := range c.invocations {
		if r == room {
			evs = append(evs, ev)
		}
	}
	c.mu.Unlock()
	return c.pick(evs)
}

func (c *campaign) threadQuestion(ctx context.Context, room id.RoomID, n int) (bool, error) {
	c.mu.Lock()
	root := c.pick(c.rel.human[room])
	c.mu.Unlock()
	if root == "" {
		return false, nil
	}
	ev, err := c.send(ctx, room, &event.MessageEventContent{
		MsgType: event.MsgText, Body: fmt.Sprintf("Lisa, in this thread, question %d?", n),
		Mentions:  &event.Mentions{UserIDs: []id.UserID{id.UserID(c.bot.UserID)}},
		RelatesTo: &event.RelatesTo{Type: event.RelThread, EventID: root, InReplyTo: &event.InReplyTo{EventID: root}, IsFallingBack: true},
	})
	if err != nil {
		return true, err
	}
	c.noteQuestion(room, ev, "thread question")
	return true, nil
}

// editQuestion edits an open question (before or after its answer): it
// must still be answered exactly once, and the edit never.
func (c *campaign) editQuestion(ctx context.Context, room id.RoomID, n int) (bool, error) {
	q := c.questionIn(room)
	if q == "" {
		return false, nil
	}
	ev, err := c.send(ctx, room, editContent(q, fmt.Sprintf("Lisa, question edited %d: what now?", n), c.bot.UserID))
	if err != nil {
		return true, err
	}
	c.noteChatter(ev, "edit of a question")
	return true, nil
}

// editChatter edits chatter so that it mentions Lisa: an edit is
// never an invocation, so both the chatter and the edit stay messages she
// must not answer (a reply to either counts as unexpected).
func (c *campaign) editChatter(ctx context.Context, room id.RoomID, n int) (bool, error) {
	c.mu.Lock()
	plain := c.rel.plain[room]
	orig := c.pick(plain)
	if orig != "" {
		c.rel.plain[room] = removeID(plain, orig)
	}
	c.mu.Unlock()
	if orig == "" {
		return false, nil
	}
	ev, err := c.send(ctx, room, editContent(orig, fmt.Sprintf("Lisa, chatter %d turned into a question?", n), c.bot.UserID))
	if err != nil {
		return true, err
	}
	c.noteChatter(ev, kindChatterEdited)
	return true, nil
}

// redactQuestion redacts an open question: Lisa must not answer it, or
// must redact her answer.
func (c *campaign) redactQuestion(ctx context.Context, room id.RoomID) (bool, error) {
	q := c.questionIn(room)
	if q == "" {
		return false, nil
	}
	c.mu.Lock()
	delete(c.invocations, q)
	c.rel.redacted[q] = room
	c.rel.kinds["redaction of a question"]++
	c.mu.Unlock()
	return true, c.redact(ctx, room, q)
}

// redact redacts ev as the human (see asHuman).
func (c *campaign) redact(ctx context.Context, room id.RoomID, ev id.EventID) error {
	return c.asHuman(ctx, "chaos-redact", func(ctx context.Context, txn string) error {
		_, err := c.human.RedactEvent(ctx, room, ev, mautrix.ReqRedact{TxnID: txn})
		return err
	})
}

// noteQuestion records a question Lisa must answer once.
func (c *campaign) noteQuestion(room id.RoomID, ev id.EventID, kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.invocations[ev] = room
	c.sentInfo[ev] = kind + " sent " + time.Now().UTC().Format("15:04:05.000")
	c.rel.kinds[kind]++
}

// noteChatter records a message Lisa must not answer.
func (c *campaign) noteChatter(ev id.EventID, kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.chatter[ev] = true
	c.rel.kinds[kind]++
}

// editContent is an edit of orig whose new text mentions bot.
func editContent(orig id.EventID, body, bot string) *event.MessageEventContent {
	mentions := &event.Mentions{UserIDs: []id.UserID{id.UserID(bot)}}
	return &event.MessageEventContent{
		MsgType: event.MsgText, Body: "* " + body, Mentions: mentions,
		NewContent: &event.MessageEventContent{MsgType: event.MsgText, Body: body, Mentions: mentions},
		RelatesTo:  &event.RelatesTo{Type: event.RelReplace, EventID: orig},
	}
}

func removeID(evs []id.EventID, ev id.EventID) []id.EventID {
	out := evs[:0:0]
	for _, e := range evs {
		if e != ev {
			out = append(out, e)
		}
	}
	return out
}

// awaitRedactions waits, until deadline, for Lisa to redact every reply
// she sent to a question that was redacted; then count reports what is
// left as a violation.
func (c *campaign) awaitRedactions(ctx context.Context, deadline time.Time) error {
	for {
		counts, _, err := c.replyCounts(ctx)
		if err != nil {
			return err
		}
		left := 0
		c.mu.Lock()
		for ev := range c.rel.redacted {
			left += counts[ev]
		}
		c.mu.Unlock()
		if left == 0 || time.Now().After(deadline) {
			return nil
		}
		time.Sleep(time.Second)
	}
}

// countRedacted checks the redacted questions: no visible reply to any,
// and no more redacted replies of Lisa's than redacted questions.
func (c *campaign) countRedacted(counts map[id.EventID]int, redactedReplies int) {
	r := c.report
	r.RedactedQuestions = len(c.rel.redacted)
	r.RedactedReplies = redactedReplies
	r.Kinds = c.rel.kinds
	for ev := range c.rel.redacted {
		if n := counts[ev]; n > 0 {
			r.AnsweredRedacted += n
		}
	}
	if r.AnsweredRedacted > 0 {
		r.violate("%d replies to redacted questions left standing", r.AnsweredRedacted)
	}
	if redactedReplies > len(c.rel.redacted) {
		r.violate("%d of Lisa's replies redacted for %d redacted questions", redactedReplies, len(c.rel.redacted))
	}
}
