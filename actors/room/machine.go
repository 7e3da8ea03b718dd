package room

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/backoff"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// Policy is the room's configuration as far as the machine needs it.
type Policy struct {
	// RoomID is the Matrix room this machine serves.
	RoomID string
	// MaxAttempts caps attempts per invocation, counting attempts that a
	// crash interrupted.
	MaxAttempts uint32
	// InvocationTimeout bounds an invocation from its first attempt's
	// start across all attempts (runtime.invocation_timeout_seconds);
	// zero means no bound.
	InvocationTimeout time.Duration
	// RetryBase and RetryMax bound the delay before a failed attempt is
	// retried: RetryBase doubled per failed attempt, capped at RetryMax.
	RetryBase, RetryMax time.Duration
	// SendRetryBase and SendRetryMax bound the delay before a failed send
	// or reconciliation is retried when the server gave no Retry-After.
	SendRetryBase, SendRetryMax time.Duration
	// SettleDelay is how long the homeserver is given to store a request
	// whose client gave up before a lookup that misses it counts: a reply
	// whose earlier send may have reached the homeserver is sent again
	// only after a lookup that began at least SettleDelay after the room
	// went quiet (see ReconcileDone.QuietSince). A homeserver can store a
	// request whose client timed out or was killed well after the client
	// saw the failure, and it recognises a repeated transaction ID only
	// once the first request finished, so an early miss proves nothing.
	// Zero trusts any miss.
	SettleDelay time.Duration
	// LateStoreWindow is how long after a send ended a homeserver that
	// restarted meanwhile may still store it. Dendrite queues a send
	// durably before processing it; a restart that cuts the processing
	// short leaves the send to be redelivered after the queue's
	// acknowledgement timeout (5 min 10 s), after later events, with its
	// transaction ID forgotten. When a send failed in doubt and the
	// homeserver may have restarted since it began (see
	// ReconcileDone.LateStoreFrom), the reply is held (ReplyHeld, durable)
	// and a lookup that misses it counts only after the hold. Zero
	// disables holds.
	LateStoreWindow time.Duration
	// TxnIDRetention is how long, after a reply was made, the homeserver
	// still recognises its transaction ID, across its own restarts (less
	// a margin for clocks; see daemon's txnIDPolicy): a send of it that
	// is stored, however late, is then answered with the stored event on
	// a repeat, never stored twice, so a reply in doubt is not held for
	// LateStoreWindow — it is looked up (SettleDelay) and sent again
	// with its transaction ID. Only for replies made at or after
	// TxnIDsFrom (a server that scopes transaction IDs to the access
	// token recognises a send of an earlier process only with the same
	// token). Zero: the server may forget them (Dendrite does).
	TxnIDRetention time.Duration
	TxnIDsFrom     time.Time
	// RecheckEvery is how often a reply in doubt is looked up again while
	// it waits for SettleDelay or LateStoreWindow: a late store found
	// meanwhile ends the wait. Zero looks only when the wait is over.
	RecheckEvery time.Duration
	// ErrorReply renders the persona's in-character error as the exact
	// content of a reply to the invoking message c (its sender pinged,
	// in its thread). It must be deterministic.
	ErrorReply func(c *roompb.Candidate) []byte
	// MaxQueue caps the room's unfinished invocations
	// (runtime.room_queue_limit); a candidate beyond it is refused. Zero
	// means no cap.
	MaxQueue int
	// SenderLimit caps the invocations one sender may queue in a room
	// within SenderWindow (runtime.sender_rate_limit,
	// runtime.sender_rate_window_seconds); a candidate beyond it is
	// refused. Zero means no cap.
	SenderLimit  int
	SenderWindow time.Duration
	// NoticeEvery is the shortest time between two overload notices of a
	// room: the first refused candidate of a burst gets OverloadReply,
	// the rest of the burst is refused with a log line only. Zero gives
	// every refused candidate a notice.
	NoticeEvery time.Duration
	// OverloadReply renders the persona's overload message as the exact
	// content of a reply to c; nil falls back to ErrorReply. It is the
	// reply to a refused candidate and to an invocation that ran out of
	// time (see isOverload). It must be deterministic.
	OverloadReply func(c *roompb.Candidate) []byte
	// WaitReaction is the reaction put on an invoking message whose
	// answer has been pending for WaitReactionAfter (runtime.wait_reaction);
	// it is redacted when the invocation ends. Empty puts none.
	WaitReaction      string
	WaitReactionAfter time.Duration
}

// phase is the head invocation's volatile progress; it is never persisted
// and starts at idle after every (re)start.
type phase int

const (
	idle phase = iota
	waitingSlot
	running
	retryWait
	sending
	reconciling
	sendWait
	checking
)

var phaseNames = [...]string{"idle", "waiting-slot", "running", "retry-wait", "sending", "reconciling", "send-wait", "checking"}

func (p phase) String() string { return phaseNames[p] }

// Machine is a room's whole logic: durable State plus volatile progress.
type Machine struct {
	State
	policy Policy

	phase    phase
	slotHeld bool
	// attempt is the attempt number of the running invocation.
	attempt uint32
	// unsure is set for a head whose reply may have reached the
	// homeserver without the room knowing: a ready reply whose send
	// outcome is unknown, or, after a restart, an attempt that started
	// (its reply is sent before ReplyReady is durable, see Output.Early).
	// It is looked up on the homeserver before it is sent again or
	// answered anew.
	unsure bool
	// sendFailures counts consecutive send failures of the head.
	sendFailures int
	// limitedUntil is the end of the latest wait a homeserver's rate limit
	// asked of this room's requests (retry_after_ms); until then no wait
	// reaction is put, as it would take a send the answers need.
	limitedUntil time.Time
	// queuedBy holds, per sender, when their invocations of the last
	// SenderWindow were queued, oldest first. It is volatile: a restart
	// forgives past bursts, which costs at most one more window.
	queuedBy map[string][]int64
	// redacting is set while the first pending redaction is in flight or
	// waits to be tried again; redactFailures counts its failures.
	redacting      bool
	redactFailures int
	// finding is the lookup in flight or waiting to be tried again (zero:
	// none); findFailures counts the transient failures in a row of
	// failing, the lookup that failed last.
	finding      Lookup
	failing      Lookup
	findFailures int
	// checked is the released held reply (Invocation.Recheck) whose
	// lookup before sending it again missed in this incarnation.
	checked string
	// heldExpiry is when the HeldExpiryDue scheduled last is due (0:
	// none scheduled).
	heldExpiry int64
	// recheck holds the queued questions this incarnation found in a
	// journal or inbox older than the sync's first commit of this
	// process, which no attempt has touched: each is checked for an
	// earlier reply of Lisa's (CheckAnswered) before it is answered (see
	// recovered).
	recheck map[string]bool
}

// NewMachine returns a machine with empty state.
func NewMachine(p Policy) *Machine { return &Machine{policy: p} }

// Restore replaces the durable state (from a snapshot) and resets volatile
// progress.
func (m *Machine) Restore(s State) {
	m.State = s
	m.phase, m.slotHeld, m.attempt, m.unsure, m.sendFailures = idle, false, 0, false, 0
	m.redacting, m.redactFailures = false, 0
	m.finding, m.failing, m.findFailures = Lookup{}, Lookup{}, 0
	m.checked, m.heldExpiry = "", 0
	m.recheck = nil
}

// Phase names the head's volatile progress, for the debug shell.
func (m *Machine) Phase() string { return m.phase.String() }

// SlotHeld reports whether the room holds a concurrency slot.
func (m *Machine) SlotHeld() bool { return m.slotHeld }

// Busy reports whether the head has work in hand that a graceful shutdown
// waits for: an attempt running, or its reply being sent or looked up.
func (m *Machine) Busy() bool {
	return m.phase == running || m.phase == sending || m.phase == reconciling
}

// Output is what one step asks the adapter to do: perform Early effects,
// persist Events (in order, each before it is applied), then perform
// Effects (in order).
//
// Early effects do not wait for the step's events to be durable, so the
// durable writes they would wait for are off the latency path: asking for
// a slot, starting an attempt (its InvocationStarted is written while the
// attempt fetches its context) and sending a fresh answer (its ReplyReady
// is written while the PUT is on its way). Each is safe if the process
// dies before the events are stored: a slot is volatile; an attempt does
// nothing visible until the room, which handles one message at a time,
// takes its result after the write; and a reply whose ReplyReady was lost
// is looked up on the homeserver before its invocation is answered again,
// because the durable InvocationStarted makes the restarted room unsure.
type Output struct {
	Early   []Effect
	Events  []proto.Message
	Effects []Effect
}

// Empty reports whether o asks for nothing.
func (o Output) Empty() bool { return len(o.Early) == 0 && len(o.Events) == 0 && len(o.Effects) == 0 }

func (o *Output) event(e proto.Message) { o.Events = append(o.Events, e) }
func (o *Output) effect(e Effect)       { o.Effects = append(o.Effects, e) }
func (o *Output) early(e Effect)        { o.Early = append(o.Early, e) }

// Decide handles one input. It changes only volatile progress; durable
// changes are returned as events for the adapter to persist and Apply.
func (m *Machine) Decide(in Input, now time.Time) Output {
	ms := now.UnixMilli()
	if d := retryAfterOf(in); d > 0 && now.Add(d).After(m.limitedUntil) {
		m.limitedUntil = now.Add(d)
	}
	switch in := in.(type) {
	case Recovered:
		return m.recovered(now)
	case InboxLoaded:
		return m.inboxLoaded(in, ms)
	case SlotGranted:
		return m.slotGranted()
	case InvocationDone:
		return m.invocationDone(in, ms)
	case RetryDue:
		m.wake(retryWait, in.EventID)
	case SendDone:
		return m.sendDone(in, ms)
	case ReconcileDone:
		return m.reconcileDone(in, ms)
	case AnsweredChecked:
		return m.answeredChecked(in, ms)
	case ResendDue:
		m.wake(sendWait, in.EventID)
	case InvocationLost:
		return m.invocationLost(in, ms)
	case ReactionDue:
		return m.reactionDue(in, now)
	case ReactionDone:
		return m.reactionDone(in)
	case RedactDue:
		m.redactDue()
	case RedactDone:
		return m.redactDone(in)
	case FindDone:
		return m.findDone(in)
	case FindDue:
		m.finding = Lookup{}
	case ResendHeld:
		return m.resendHeld(ms)
	case HeldExpiryDue:
		m.heldExpiry = 0
	default:
		panic(fmt.Sprintf("room: unknown input %T", in))
	}
	return Output{}
}

// recovered starts an incarnation: whatever was in flight before the
// restart is unknown now.
func (m *Machine) recovered(now time.Time) Output {
	var out Output
	if head := m.Head(); head != nil && (head.Ready || head.Attempts > 0) {
		m.unsure = true
	}
	// A question queued but never tried may have been answered all the
	// same: by a later process whose journal is lost, when this data dir
	// is older than the room (a restored backup, a rolled-back VM
	// snapshot, a cold copy put back). Nothing in the journal can tell,
	// so each is checked before it is answered. (An attempt that started
	// is looked up anyway: m.unsure.)
	for _, inv := range m.Queue {
		if inv.Attempts == 0 && (!inv.Ready || inv.Notice) && !inv.Redacted {
			m.markRecheck(inv.EventID())
		}
	}
	for _, inv := range m.Queue {
		if !inv.Notice && !inv.Redacted && inv.ReactionEventID == "" && !inv.ReactionRequested && inv.ForbiddenAtMs == 0 {
			m.waitReaction(&out, inv.EventID(), now.Sub(time.UnixMilli(inv.QueuedAtMs)))
		}
	}
	out.effect(LoadInbox{})
	return out
}

// inboxLoaded takes in new candidates: each is queued, refused, recorded
// as a duplicate, or (not this room's) only cleared out of the inbox.
func (m *Machine) inboxLoaded(in InboxLoaded, ms int64) Output {
	var out Output
	batch := map[string]bool{}
	queued, noticed, released := map[string]*roompb.Candidate{}, false, false
	taken := inboxBatch{queued: queued, edits: map[string]bool{}}
	for _, c := range in.Candidates {
		id := c.GetEventId()
		if c.GetRoomId() != m.policy.RoomID || id == "" {
			// Not ours: never queue it, but do clear it out.
			out.effect(RemoveInbox{EventID: id})
			continue
		}
		if isPermissionChange(c) {
			released = m.permissionChange(&out, c, released, ms)
			continue
		}
		if m.relation(&out, c, taken) {
			continue
		}
		if m.Knows(id) || batch[id] {
			out.event(&roompb.InvocationDuplicate{EventId: id})
			out.effect(RemoveInbox{EventID: id})
			continue
		}
		if reply := in.Answered[id]; reply != "" {
			// Lisa's reply to it is on the homeserver, after it: the
			// question came back to a journal older than the room.
			// Taken in as answered, never answered again.
			batch[id] = true
			out.event(&roompb.InvocationQueued{Candidate: c, QueuedAtMs: ms})
			out.event(&roompb.ReplySent{EventId: id, ReplyEventId: reply, SentAtMs: ms, Reconciled: true})
			continue
		}
		// The journal removes the inbox entry in the same write
		// (persistence.TakenFromInbox): one durable write, not two.
		batch[id] = true
		if ref := m.refuse(c, m.pending()+len(queued), noticed, ms); ref != nil {
			noticed = noticed || len(ref.NoticeContent) > 0
			out.event(ref)
			continue
		}
		m.countSender(c.GetSender(), ms)
		queued[id] = c
		out.event(&roompb.InvocationQueued{Candidate: c, QueuedAtMs: ms})
		if in.BeforeIntake {
			m.markRecheck(id)
		}
		m.waitReaction(&out, id, 0)
	}
	return out
}

// slotGranted takes a slot the room waits for, or gives back one it does
// not (a grant that crossed a reset).
func (m *Machine) slotGranted() Output {
	var out Output
	if m.phase == waitingSlot && !m.slotHeld {
		m.slotHeld = true
		m.phase = idle
	} else {
		out.effect(ReleaseSlot{})
	}
	return out
}

// invocationDone takes an attempt's result: the reply is ready, or the
// attempt failed and is retried after a backoff, or (permanent failure,
// attempts spent) the persona's error becomes the reply.
func (m *Machine) invocationDone(in InvocationDone, ms int64) Output {
	var out Output
	head := m.Head()
	if m.phase != running || head == nil || head.EventID() != in.EventID || m.attempt != in.Attempt {
		return out // a stale result from an attempt that no longer counts
	}
	m.phase = idle
	m.slotHeld = false
	out.effect(ReleaseSlot{})
	if in.Err == nil {
		txn := string(messages.ReplyTxnID(messages.RoomID(m.policy.RoomID), messages.EventID(in.EventID)))
		out.event(&roompb.ReplyReady{EventId: in.EventID, TxnId: txn, Content: in.Content, ReadyAtMs: ms})
		// Sent at once, while ReplyReady is written (see Output.Early).
		m.phase = sending
		out.early(SendReply{EventID: in.EventID, TxnID: txn, Content: in.Content})
		return out
	}
	out.event(&roompb.InvocationFailed{
		EventId: in.EventID, Attempt: in.Attempt, Code: string(in.Err.Code),
		Permanent: in.Err.Permanent, FailedAtMs: ms,
	})
	if in.Err.Code == messages.CodeRefusedBudget {
		// A token budget is spent and the room had its notice today:
		// the question ends without a reply (logged and counted).
		out.event(&roompb.InvocationDropped{EventId: in.EventID, Code: string(messages.CodeRefusedBudget)})
		return out
	}
	if in.Err.Permanent || in.Attempt >= m.policy.MaxAttempts {
		out.event(m.errorReply(head, ms, isOverload(in.Err.Code)))
		return out
	}
	m.phase = retryWait
	out.effect(Schedule{After: m.retryDelay(in.Attempt), Input: RetryDue{EventID: in.EventID}})
	return out
}

// invocationLost takes the death of the invocation child without a
// result as a failed attempt.
func (m *Machine) invocationLost(in InvocationLost, ms int64) Output {
	head := m.Head()
	if m.phase != running || head == nil || head.EventID() != in.EventID || m.attempt != in.Attempt {
		return Output{}
	}
	return m.invocationDone(InvocationDone{EventID: in.EventID, Attempt: in.Attempt, Err: &messages.Error{
		Code: messages.CodeInvocationLost, Message: "invocation child stopped without a result"}}, ms)
}

// wake ends the wait p of the head invocation eventID, if the machine is
// still in it: Pump then moves on.
func (m *Machine) wake(p phase, eventID string) {
	if head := m.Head(); m.phase == p && head != nil && head.EventID() == eventID {
		m.phase = idle
	}
}

// sendDone takes the outcome of sending the head's reply.
func (m *Machine) sendDone(in SendDone, ms int64) Output {
	var out Output
	head := m.Head()
	if m.phase != sending || head == nil || head.EventID() != in.EventID {
		return out
	}
	m.phase = idle
	switch {
	case in.Err == nil:
		m.sendFailures = 0
		out.event(&roompb.ReplySent{EventId: in.EventID, ReplyEventId: in.ReplyEventID, SentAtMs: ms})
		out.effect(RecordBotEvent{ReplyEventID: in.ReplyEventID, InReplyTo: in.EventID})
	case in.Err.Permanent && in.Err.Code == messages.CodeMatrixForbidden:
		// Lisa may not post here (power levels, membership): the exact
		// reply is held, out of the queue, until the room is fixed (see
		// held.go). Later invocations go on meanwhile. Released again,
		// it is looked up again.
		m.sendFailures, m.checked = 0, ""
		out.event(&roompb.ReplyForbidden{EventId: in.EventID, Code: string(in.Err.Code), RefusedAtMs: ms})
	case in.Err.Permanent && !head.IsError:
		// The homeserver refused this reply's content for good (too
		// large, malformed): the persona's error still gives exactly
		// one reply.
		out.event(m.errorReply(head, ms, false))
	case in.Err.Permanent:
		// The persona's error refused for good as well: logged at ERROR
		// and counted as abandoned.
		out.event(&roompb.ReplyAbandoned{EventId: in.EventID, Code: string(in.Err.Code), AbandonedAtMs: ms})
	default:
		// The request may have reached the server: look before
		// sending again.
		m.unsure = in.Ambiguous
		if in.Ambiguous {
			m.holdUntil(&out, head, in.LateStoreFrom, time.UnixMilli(ms))
		}
		m.sendFailed(&out, in.EventID, in.RetryAfter)
	}
	return out
}

// sendFailed counts a failed send or lookup of the head and schedules the
// next try.
func (m *Machine) sendFailed(out *Output, eventID string, retryAfter time.Duration) {
	m.sendFailures++
	m.phase = sendWait
	out.effect(Schedule{After: m.sendDelay(retryAfter), Input: ResendDue{EventID: eventID}})
}

// reconcileDone takes the outcome of looking up the head's reply on the
// homeserver.
func (m *Machine) reconcileDone(in ReconcileDone, ms int64) Output {
	var out Output
	head := m.Head()
	if m.phase != reconciling || head == nil || head.EventID() != in.EventID {
		return out
	}
	m.phase = idle
	switch {
	case in.Err != nil:
		// A failed lookup proves nothing; the adapter counts the
		// failure as the room's latest unquiet moment.
		m.sendFailed(&out, in.EventID, in.RetryAfter)
	case in.Found:
		m.unsure, m.sendFailures = false, 0
		out.event(&roompb.ReplySent{EventId: in.EventID, ReplyEventId: in.ReplyEventID, SentAtMs: ms, Reconciled: true})
		out.effect(RecordBotEvent{ReplyEventID: in.ReplyEventID, InReplyTo: in.EventID})
	default:
		m.notFound(&out, head, in)
	}
	return out
}

// markRecheck adds eventID to the questions to check for an earlier
// reply before they are answered.
func (m *Machine) markRecheck(eventID string) {
	if m.recheck == nil {
		m.recheck = map[string]bool{}
	}
	m.recheck[eventID] = true
}

// answeredChecked takes the outcome of CheckAnswered: an earlier reply
// found ends the question as answered; none lets it be answered; a failed
// check is tried again after a pause.
func (m *Machine) answeredChecked(in AnsweredChecked, ms int64) Output {
	var out Output
	head := m.Head()
	if m.phase != checking || head == nil || head.EventID() != in.EventID {
		return out
	}
	m.phase = idle
	switch {
	case in.Err != nil:
		m.sendFailed(&out, in.EventID, in.RetryAfter)
	case in.ReplyEventID != "":
		delete(m.recheck, in.EventID)
		m.sendFailures = 0
		out.event(&roompb.ReplySent{EventId: in.EventID, ReplyEventId: in.ReplyEventID, SentAtMs: ms, Reconciled: true})
		out.effect(RecordBotEvent{ReplyEventID: in.ReplyEventID, InReplyTo: in.EventID})
	default:
		delete(m.recheck, in.EventID)
		m.sendFailures = 0
	}
	return out
}

// notFound takes a lookup that missed the head's reply: the reply may be
// sent again if the miss counts, else it is looked up again later.
func (m *Machine) notFound(out *Output, head *Invocation, in ReconcileDone) {
	due := m.missCountsFrom(out, head, in)
	if !in.LookedAt.Before(due) {
		m.unsure = false
		if head.Recheck {
			m.checked = head.EventID()
		}
		return
	}
	// Not there yet, but a send the homeserver is still processing, or
	// will process again after a restart, would not be either: look
	// again, and trust a miss only once every send had time to be stored.
	m.phase = sendWait
	wait := due.Sub(in.LookedAt)
	if r := m.policy.RecheckEvery; r > 0 && r < wait {
		wait = r
	}
	out.effect(Schedule{After: wait, Input: ResendDue{EventID: in.EventID}})
}

// Pump moves the head of the queue forward when nothing is in flight. The
// adapter calls it after applying a step's events, until it returns an
// empty Output.
func (m *Machine) Pump(now time.Time) Output {
	out := m.pumpRedactions()
	m.pumpLookups(&out)
	if m.pumpHeld(&out, now) {
		return out // the drops are applied first
	}
	if m.phase != idle {
		return out
	}
	head := m.Head()
	switch {
	case head == nil:
		if m.slotHeld {
			m.slotHeld = false
			out.effect(ReleaseSlot{})
		}
	case head.Ready && m.unsure:
		m.phase = reconciling
		out.effect(Reconcile{EventID: head.EventID(), TxnID: head.TxnID})
	case m.unsure && !head.Ready && !head.Notice:
		// An attempt started before a restart: its reply may be out.
		m.phase = reconciling
		out.effect(Reconcile{EventID: head.EventID(),
			TxnID: string(messages.ReplyTxnID(messages.RoomID(m.policy.RoomID), messages.EventID(head.EventID())))})
	case head.Redacted:
		// Its question is gone and no reply of it is out: the lookup
		// missed, or the send never reached the homeserver.
		out.event(&roompb.InvocationDropped{EventId: head.EventID()})
	case m.recheck[head.EventID()] && head.Attempts == 0 && (!head.Ready || head.Notice):
		// Queued before this process's first sync commit: answered
		// already by a process whose journal is lost? (see recovered)
		m.phase = checking
		txn := head.TxnID
		if txn == "" {
			txn = string(messages.ReplyTxnID(messages.RoomID(m.policy.RoomID), messages.EventID(head.EventID())))
		}
		out.effect(CheckAnswered{EventID: head.EventID(), TxnID: txn})
	case head.Ready && head.Recheck && m.checked != head.EventID():
		// A held reply released: looked up before it is sent again,
		// as any reply whose fate the room has not seen for itself.
		m.phase = reconciling
		out.effect(Reconcile{EventID: head.EventID(), TxnID: head.TxnID})
	case head.Ready:
		m.phase = sending
		// From here until SendDone the outcome is unknown; a crash in
		// between is caught by Recovered.
		out.effect(SendReply{EventID: head.EventID(), TxnID: head.TxnID, Content: head.Content})
	case head.Attempts >= m.policy.MaxAttempts || m.expired(head, now):
		// Every attempt or the invocation's time is spent (the last
		// attempt may have been cut short by a crash).
		out.event(m.errorReply(head, now.UnixMilli(), m.expired(head, now)))
	case !m.slotHeld:
		m.phase = waitingSlot
		out.early(RequestSlot{})
	default:
		m.phase = running
		m.attempt = head.Attempts + 1
		out.event(&roompb.InvocationStarted{EventId: head.EventID(), Attempt: m.attempt, StartedAtMs: now.UnixMilli()})
		out.early(StartInvocation{Candidate: head.Candidate, Attempt: m.attempt, Deadline: m.deadline(head, now)})
	}
	return out
}

// refuse returns the journal event that refuses candidate c, or nil when
// c may be queued: the room already holds queueLen unfinished
// invocations, and noticed says an overload notice was already given in
// this step. Only the first refusal of a burst carries a notice; it
// answers the refused event itself, so exactly-once holds for it too.
func (m *Machine) refuse(c *roompb.Candidate, queueLen int, noticed bool, ms int64) *roompb.InvocationRefused {
	reason := ""
	switch {
	case m.policy.MaxQueue > 0 && queueLen >= m.policy.MaxQueue:
		reason = RefusedQueueFull
	case m.policy.SenderLimit > 0 && m.senderCount(c.GetSender(), ms) >= m.policy.SenderLimit:
		reason = RefusedSenderRate
	default:
		return nil
	}
	ref := &roompb.InvocationRefused{
		// Only what identifies the event is kept: a refused body
		// must not cost journal space.
		Candidate: &roompb.Candidate{
			RoomId: c.GetRoomId(), EventId: c.GetEventId(), Sender: c.GetSender(),
			OriginTsMs: c.GetOriginTsMs(), Trigger: c.GetTrigger(), InboxSeq: c.GetInboxSeq(),
			ThreadRootEventId: c.GetThreadRootEventId(),
		},
		Reason:      reason,
		RefusedAtMs: ms,
	}
	if !noticed && !m.noticePending() && (m.NoticeAtMs == 0 || ms-m.NoticeAtMs >= m.policy.NoticeEvery.Milliseconds()) {
		reply := m.policy.OverloadReply
		if reply == nil {
			reply = m.policy.ErrorReply
		}
		ref.NoticeTxnId = string(messages.ReplyTxnID(messages.RoomID(m.policy.RoomID), messages.EventID(c.GetEventId()+"#overload")))
		ref.NoticeContent = reply(ref.GetCandidate())
	}
	return ref
}

// Reasons a candidate is refused (roompb.InvocationRefused.reason).
const (
	RefusedQueueFull  = "queue_full"
	RefusedSenderRate = "sender_rate"
)

// pending counts the unfinished invocations that count against MaxQueue:
// every queued one but overload notices.
func (m *Machine) pending() int {
	n := 0
	for _, inv := range m.Queue {
		if !inv.Notice {
			n++
		}
	}
	return n
}

// noticePending reports whether an overload notice waits in the queue: a
// burst that outlasts NoticeEvery still gets only one.
func (m *Machine) noticePending() bool {
	for _, inv := range m.Queue {
		if inv.Notice {
			return true
		}
	}
	return false
}

// senderCount returns how many invocations sender queued in this room
// within the last SenderWindow, dropping older ones.
func (m *Machine) senderCount(sender string, ms int64) int {
	times := m.queuedBy[sender]
	from := ms - m.policy.SenderWindow.Milliseconds()
	i := 0
	for i < len(times) && times[i] <= from {
		i++
	}
	if i == len(times) {
		delete(m.queuedBy, sender)
		return 0
	}
	m.queuedBy[sender] = times[i:]
	return len(times) - i
}

// countSender records that sender queued an invocation at ms.
func (m *Machine) countSender(sender string, ms int64) {
	if m.policy.SenderLimit <= 0 {
		return
	}
	if m.queuedBy == nil {
		m.queuedBy = map[string][]int64{}
	}
	m.senderCount(sender, ms) // prune first: the slice stays within the limit
	m.queuedBy[sender] = append(m.queuedBy[sender], ms)
}

// deadline is when the head invocation must be done: its first attempt's
// start (now, for the first attempt) plus the invocation timeout. Zero
// means none.
func (m *Machine) deadline(head *Invocation, now time.Time) time.Time {
	if m.policy.InvocationTimeout <= 0 {
		return time.Time{}
	}
	start := now
	if head.FirstStartedAtMs != 0 {
		start = time.UnixMilli(head.FirstStartedAtMs)
	}
	return start.Add(m.policy.InvocationTimeout)
}

// expired reports whether the head's time ran out before another attempt.
func (m *Machine) expired(head *Invocation, now time.Time) bool {
	if m.policy.InvocationTimeout <= 0 || head.FirstStartedAtMs == 0 {
		return false
	}
	return !now.Before(time.UnixMilli(head.FirstStartedAtMs).Add(m.policy.InvocationTimeout))
}

// isOverload reports the failures that mean "too slow or too busy": the
// invocation's time ran out, or the model did not answer in time. They
// get the persona's overload message rather than the generic error.
func isOverload(code messages.Code) bool {
	return code == messages.CodeLLMTimeout || code == messages.CodeDeadline
}

// errorReply prepares the persona's error (its overload message when
// overload is set and there is one) as the reply, not sent yet. Its
// transaction ID differs from the answer's, so a refused answer cannot
// shadow it.
func (m *Machine) errorReply(head *Invocation, ms int64, overload bool) *roompb.ReplyReady {
	render := m.policy.ErrorReply
	if overload && m.policy.OverloadReply != nil {
		render = m.policy.OverloadReply
	}
	return &roompb.ReplyReady{
		EventId:   head.EventID(),
		TxnId:     string(messages.ReplyTxnID(messages.RoomID(m.policy.RoomID), messages.EventID(head.EventID()+"#error"))),
		Content:   render(head.Candidate),
		IsError:   true,
		ReadyAtMs: ms,
	}
}

// missCountsFrom is the earliest moment a lookup that misses the head's
// reply proves it was never stored: SettleDelay after the room went quiet,
// and not before the reply's hold ends. It extends the hold first if in
// says the homeserver may have restarted since the last send, or, for a
// reply already held, since the hold began (in.TroubleAt).
func (m *Machine) missCountsFrom(out *Output, head *Invocation, in ReconcileDone) time.Time {
	at := in.QuietSince.Add(m.policy.SettleDelay)
	lateFrom := in.LateStoreFrom
	// A reply held for a late store stays in doubt while the homeserver
	// keeps restarting: each restart starts its redelivery wait again,
	// also a restart while this process was down (its first /sync) or
	// after a send of an earlier process.
	if head.HeldUntilMs > 0 && in.TroubleAt.After(lateFrom) {
		lateFrom = in.TroubleAt
	}
	// A ready reply that no send of this process has tried may have been
	// on its way when an earlier process died, and the homeserver may
	// have restarted unseen since, with it queued: held as well. (A reply
	// not ready in the journal was at most sent early, in the instant
	// before ReplyReady was written; that is not held, or every crash
	// during a model call would delay the answer by the window. Nor is a
	// released reply the homeserver had refused, which an operator
	// waits for: only a send since its release, cut by a crash and a
	// homeserver restart together, could be stored late.)
	if head.Ready && !head.Recheck && in.NoSendHere && in.TroubleAt.After(lateFrom) {
		lateFrom = in.TroubleAt
	}
	if h := m.holdUntil(out, head, lateFrom, in.LookedAt); h.After(at) {
		at = h
	}
	return at
}

// holdUntil returns when the head's reply may be sent again at the
// earliest, after emitting a ReplyHeld that extends its hold to
// LateStoreWindow after lateFrom (zero: no new hold) if that is later —
// unless the homeserver still recognises the reply's transaction ID at
// (txnIDsCover). A hold already journaled stays.
func (m *Machine) holdUntil(out *Output, head *Invocation, lateFrom, at time.Time) time.Time {
	until := head.HeldUntilMs
	if m.policy.LateStoreWindow > 0 && !lateFrom.IsZero() && !m.txnIDsCover(head, at) {
		if u := lateFrom.Add(m.policy.LateStoreWindow).UnixMilli(); u > until {
			out.event(&roompb.ReplyHeld{EventId: head.EventID(), UntilMs: u})
			until = u
		}
	}
	return time.UnixMilli(until)
}

// txnIDsCover reports whether the homeserver recognises the transaction
// ID of the head's reply at: it keeps them across restarts, the reply was
// made at or after TxnIDsFrom, and at is less than TxnIDRetention after
// it was made (every send of it, and the server's record of one, came
// after that). Unknown times never count as covered.
//
// A reply not ready in the journal may still have been sent (its send
// starts while ReplyReady is written, Output.Early), always with the
// event's one transaction ID and never before the first attempt started:
// FirstStartedAtMs stands in for when it was made. (Found by lisa-chaos
// on Synapse: a room that died in its first attempt held the answer for
// late_store_seconds on a server that keeps transaction IDs.)
func (m *Machine) txnIDsCover(head *Invocation, at time.Time) bool {
	r := m.policy.TxnIDRetention
	madeMs := head.ReadyAtMs
	if madeMs <= 0 {
		madeMs = head.FirstStartedAtMs
	}
	if r <= 0 || madeMs <= 0 || at.IsZero() {
		return false
	}
	made := time.UnixMilli(madeMs)
	return !made.Before(m.policy.TxnIDsFrom) && !at.Before(made) && at.Sub(made) < r
}

// sendDelay is the pause before the head's send or lookup is tried again
// after sendFailures consecutive failures: the server's Retry-After if it
// gave one, else SendRetryBase doubled per failure; both capped at
// SendRetryMax.
func (m *Machine) sendDelay(retryAfter time.Duration) time.Duration {
	return backoff.Policy{Base: m.policy.SendRetryBase, Max: m.policy.SendRetryMax}.Delay(m.sendFailures, retryAfter)
}

// retryDelay is the pause before attempt+1 after attempt failed:
// RetryBase doubled per failed attempt, capped at RetryMax.
func (m *Machine) retryDelay(attempt uint32) time.Duration {
	return backoff.Doubled(m.policy.RetryBase, m.policy.RetryMax, int(attempt))
}

// retryAfterOf returns the wait a homeserver asked for in the outcome in
// (a rate limit's retry_after_ms), or 0.
func retryAfterOf(in Input) time.Duration {
	switch in := in.(type) {
	case SendDone:
		return in.RetryAfter
	case ReconcileDone:
		return in.RetryAfter
	case AnsweredChecked:
		return in.RetryAfter
	case ReactionDone:
		return in.RetryAfter
	case RedactDone:
		return in.RetryAfter
	case FindDone:
		return in.RetryAfter
	}
	return 0
}
