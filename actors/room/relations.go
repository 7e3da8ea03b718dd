package room

import (
	"slices"
	"time"

	"github.com/lisabot/lisa/backoff"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// What members do to an invoking message after sending it: edit it,
// redact it. And what Lisa does while they wait: a reaction that she
// removes when she answers.

// inboxBatch is what one InboxLoaded step has taken in so far (not applied
// yet): the candidates it queues and the edits it saw.
type inboxBatch struct {
	queued map[string]*roompb.Candidate
	edits  map[string]bool
}

// relation takes in an inbox candidate that is an edit or a redaction. It
// reports false for an ordinary candidate.
func (m *Machine) relation(out *Output, c *roompb.Candidate, b inboxBatch) bool {
	switch {
	case c.GetRedactsEventId() != "":
		m.redaction(out, c, b)
	case c.GetReplacesEventId() != "":
		b.edits[c.GetEventId()] = true
		m.edit(out, c, b.queued)
	default:
		return false
	}
	return true
}

// redaction takes in a redaction of target (the sync routes only
// redactions of messages that were routed to the room): a question not
// answered yet is dropped (its running attempt stopped); one whose reply
// may be out already is kept, never sent, until its lookup says; the
// reply to a question answered recently is redacted in turn, and one
// answered too long ago to be remembered is looked up on the homeserver
// first. A question that ended without a reply needs nothing, nor does an
// edit of a question (Lisa never answers an edit): one the room knows of
// (the edit of a queued invocation, or one in the same batch) is ignored
// with the outcome OutcomeEditRedaction.
func (m *Machine) redaction(out *Output, c *roompb.Candidate, b inboxBatch) {
	target := c.GetRedactsEventId()
	ev := &roompb.InvocationRedacted{EventId: target, RedactionEventId: c.GetEventId(), RoomId: m.policy.RoomID}
	switch inv := m.Queued(target); {
	case inv != nil:
		if head := m.Head(); head == inv && !inv.Ready {
			if m.unsure {
				// A restarted room is looking up whether the attempt
				// before the restart sent its reply (see Output.Early):
				// the lookup goes on, and what it finds is redacted.
				ev.ReplyMayExist = true
			} else {
				m.headGone(out)
			}
		}
	case b.queued[target] != nil:
	case m.Reply(target) != "":
		ev.ReplyEventId = m.Reply(target)
	case m.HeldReply(target) != nil:
		// Its held reply is dropped: never sent.
	case m.Knows(target):
		// Ended recently without a reply (refused, abandoned, dropped).
		out.effect(RemoveInbox{EventID: c.GetEventId()})
		return
	case b.edits[target] || m.edited(target):
		// No reply of Lisa's relates to an edit: nothing to look up.
		out.effect(RemoveInbox{EventID: c.GetEventId(), Outcome: OutcomeEditRedaction})
		return
	default:
		// Answered before the room's memory (RecentLimit) begins, or
		// routed and never queued: look for a reply on the homeserver.
		ev.FindReply = true
	}
	out.event(ev)
}

// edited reports whether eventID is the edit whose text a queued
// invocation took (InvocationEdited).
func (m *Machine) edited(eventID string) bool {
	for _, inv := range m.Queue {
		if inv.Candidate.GetEditEventId() == eventID {
			return true
		}
	}
	return false
}

// headGone ends the volatile progress of a head that is being dropped
// before its reply was fixed and before any of it could be out: a running
// attempt is stopped, a retry wait ends. A slot held or asked for stays
// with the room.
func (m *Machine) headGone(out *Output) {
	switch m.phase {
	case running:
		out.effect(CancelInvocation{})
		m.phase = idle
	case retryWait:
		m.phase = idle
	}
}

// edit takes in an edit of a message that invoked Lisa (the sync routes
// no other edit: an edit is never an invocation). An invocation that has
// not started takes the new text, if the edit is its sender's; anything
// else (a started or answered invocation, another member's edit, an
// edit of a message the room does not hold, such as one an older
// version routed as a new invocation) is ignored with the outcome
// OutcomeEdit.
func (m *Machine) edit(out *Output, c *roompb.Candidate, queued map[string]*roompb.Candidate) {
	orig := c.GetReplacesEventId()
	edited := &roompb.InvocationEdited{
		EventId: orig, EditEventId: c.GetEventId(), Body: c.GetBody(), FormattedBody: c.GetFormattedBody(), RoomId: m.policy.RoomID,
	}
	if inv := m.Queued(orig); inv != nil {
		if inv.Attempts == 0 && !inv.Ready && !inv.Notice && inv.Candidate.GetSender() == c.GetSender() {
			out.event(edited)
			return
		}
	} else if q := queued[orig]; q != nil && q.GetSender() == c.GetSender() {
		out.event(edited)
		return
	}
	out.effect(RemoveInbox{EventID: c.GetEventId(), Outcome: OutcomeEdit})
}

// waitReaction schedules the wait reaction of eventID after the policy's
// delay less waited, if the policy puts one.
func (m *Machine) waitReaction(out *Output, eventID string, waited time.Duration) {
	if m.policy.WaitReaction == "" || m.policy.WaitReactionAfter <= 0 {
		return
	}
	out.effect(Schedule{After: max(m.policy.WaitReactionAfter-waited, 0), Input: ReactionDue{EventID: eventID}})
}

// reactionDue puts the wait reaction on an invocation still pending,
// once: ReactionRequested is durable before the request (the adapter
// syncs the journal before it sends), so a reaction the homeserver stored
// without Lisa learning of it is looked up when the invocation ends.
//
// While the homeserver's rate limit holds the room (limitedUntil) no
// reaction is put: Synapse counts a reaction against the same rc_message
// as a reply (synapse/handlers/message.py ratelimits every client event),
// so a ⏳ would delay the answers it announces and meet a 429 itself.
func (m *Machine) reactionDue(in ReactionDue, now time.Time) Output {
	var out Output
	inv := m.Queued(in.EventID)
	if inv == nil || inv.Notice || inv.Redacted || inv.ReactionEventID != "" || inv.ReactionRequested || inv.ForbiddenAtMs != 0 || m.policy.WaitReaction == "" {
		return out
	}
	if now.Before(m.limitedUntil) {
		return out
	}
	out.event(&roompb.ReactionRequested{EventId: in.EventID})
	out.effect(SendReaction{EventID: in.EventID, Key: m.policy.WaitReaction,
		TxnID: string(messages.ReplyTxnID(messages.RoomID(m.policy.RoomID), messages.EventID(in.EventID+"#wait")))})
	return out
}

// reactionDone records the wait reaction. A failed one is not retried:
// it is a courtesy, and the answer does not wait for it; if it reached
// the homeserver all the same, the lookup when the invocation ends finds
// it.
func (m *Machine) reactionDone(in ReactionDone) Output {
	var out Output
	if in.Err == nil && in.ReactionEventID != "" {
		out.event(&roompb.ReactionSent{EventId: in.EventID, ReactionEventId: in.ReactionEventID})
	}
	return out
}

// pumpLookups starts the oldest lookup of Lisa's events to redact, one at
// a time, whatever the head is doing.
func (m *Machine) pumpLookups(out *Output) {
	if m.dropLookups(out) || m.finding != (Lookup{}) || len(m.Lookups) == 0 {
		return
	}
	l := m.Lookups[0]
	if l != m.failing {
		// Another lookup than the one that failed last (that one was
		// settled meanwhile): its failures start from zero.
		m.failing, m.findFailures = Lookup{}, 0
	}
	m.finding = l
	eff := FindToRedact{EventID: l.EventID, Kind: l.Kind}
	switch l.Kind {
	case LookupReply:
		eff.TxnID = string(messages.ReplyTxnID(messages.RoomID(m.policy.RoomID), messages.EventID(l.EventID)))
	case LookupReaction:
		eff.Key = m.policy.WaitReaction
	}
	out.effect(eff)
}

// dropLookups gives up the oldest lookups beyond LookupLimit, but the one
// in flight (it is about to end), each with a LookupDone of code
// LookupDropped, and reports whether it did: the next lookup starts once
// they are applied.
func (m *Machine) dropLookups(out *Output) bool {
	excess := len(m.Lookups) - LookupLimit
	if excess <= 0 {
		return false
	}
	for _, l := range m.Lookups {
		if excess == 0 {
			break
		}
		if l != m.finding {
			out.event(&roompb.LookupDone{EventId: l.EventID, Kind: l.Kind, Code: LookupDropped})
			excess--
		}
	}
	return true
}

// LookupAttempts bounds how often a lookup of Lisa's events to redact is
// tried while it fails transiently (a timeout, a homeserver error): after
// that many failures in a row it is given up, journaled as LookupDone with
// the last failure's code, so that the lookups behind it (they run one at
// a time, oldest first) are not held up for ever. A failed lookup sends
// nothing; what it would have found stays unredacted.
const LookupAttempts = 5

// findDone records what a lookup found (to be redacted), gives up one the
// homeserver refuses for good or that failed LookupAttempts times in a
// row, or tries again after a pause.
func (m *Machine) findDone(in FindDone) Output {
	var out Output
	l := Lookup{EventID: in.EventID, Kind: in.Kind}
	if m.finding != l {
		return out
	}
	if !slices.Contains(m.Lookups, l) {
		m.finding = Lookup{} // settled meanwhile (the reaction was confirmed)
		return out
	}
	if in.Err != nil && !in.Err.Permanent {
		m.failing = l
		m.findFailures++
	}
	switch {
	case in.Err == nil:
		m.finding, m.failing, m.findFailures = Lookup{}, Lookup{}, 0
		out.event(&roompb.LookupDone{EventId: in.EventID, Kind: in.Kind, FoundEventIds: in.Found})
	case in.Err.Permanent || m.findFailures >= LookupAttempts:
		m.finding, m.failing, m.findFailures = Lookup{}, Lookup{}, 0
		code := in.Err.Code
		if code == "" {
			code = messages.CodeInternal // a code marks the lookup as given up
		}
		out.event(&roompb.LookupDone{EventId: in.EventID, Kind: in.Kind, Code: string(code)})
	default:
		delay := backoff.Policy{Base: m.policy.SendRetryBase, Max: m.policy.SendRetryMax}.Delay(m.findFailures, in.RetryAfter)
		out.effect(Schedule{After: delay, Input: FindDue{}})
	}
	return out
}

// pumpRedactions starts the redaction of the oldest pending event of
// Lisa's, one at a time, whatever the head is doing.
func (m *Machine) pumpRedactions() Output {
	var out Output
	if m.redacting || len(m.PendingRedactions) == 0 {
		return out
	}
	m.redacting = true
	target := m.PendingRedactions[0]
	out.effect(Redact{EventID: target,
		TxnID: string(messages.ReplyTxnID(messages.RoomID(m.policy.RoomID), messages.EventID(target+"#redact")))})
	return out
}

// redactDone records a redaction, gives up one the homeserver refuses for
// good (logged with its code), or tries again after a pause.
func (m *Machine) redactDone(in RedactDone) Output {
	var out Output
	if !m.redacting || len(m.PendingRedactions) == 0 || m.PendingRedactions[0] != in.EventID {
		return out
	}
	switch {
	case in.Err == nil:
		m.redactFailures = 0
		m.redacting = false
		out.event(&roompb.Redacted{EventId: in.EventID})
	case in.Err.Permanent:
		m.redactFailures = 0
		m.redacting = false
		out.event(&roompb.Redacted{EventId: in.EventID, Code: string(in.Err.Code)})
	default:
		m.redactFailures++
		delay := backoff.Policy{Base: m.policy.SendRetryBase, Max: m.policy.SendRetryMax}.Delay(m.redactFailures, in.RetryAfter)
		out.effect(Schedule{After: delay, Input: RedactDue{}})
	}
	return out
}

// redactDue ends the pause after a failed redaction.
func (m *Machine) redactDue() {
	m.redacting = false
}
