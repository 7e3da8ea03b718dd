package room

import (
	"fmt"
	"strings"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// Input is something that happened to a room: a message from outside, a
// result of an effect, or a timer.
type Input interface{ isInput() }

// Recovered: the journal has been replayed; the actor is live.
type Recovered struct{}

// InboxLoaded carries the room's pending inbox entries.
type InboxLoaded struct {
	Candidates []*roompb.Candidate
	// Answered maps a candidate's event ID to the event Lisa answered it
	// with, where the bot-event ledger knows one: the question came
	// back to a data dir older than the room (a restored backup) with
	// her reply after it. Such a candidate is recorded as answered, never
	// answered again.
	Answered map[string]string
	// BeforeIntake is set when the entries were read before this
	// process's sync committed its first answer: the ledger may not know
	// Lisa's replies since its cursor yet, so each queued candidate is
	// checked again (CheckAnswered) before it is answered.
	BeforeIntake bool
}

// SlotGranted: the rooms supervisor granted a concurrency slot.
type SlotGranted struct{}

// InvocationDone is the outcome of one attempt: Content on success, Err
// otherwise.
type InvocationDone struct {
	EventID string
	Attempt uint32
	Content []byte
	Err     *messages.Error
}

// InvocationLost: the invocation child stopped without reporting.
type InvocationLost struct {
	EventID string
	Attempt uint32
}

// RetryDue: the delay before the next attempt has passed.
type RetryDue struct{ EventID string }

// SendDone is the outcome of sending a reply. Ambiguous marks failures
// after which the server may nevertheless have stored the event.
type SendDone struct {
	EventID      string
	ReplyEventID string
	Err          *messages.Error
	Ambiguous    bool
	RetryAfter   time.Duration
	// LateStoreFrom: see ReconcileDone.LateStoreFrom (set only for
	// ambiguous failures).
	LateStoreFrom time.Time
}

// ReconcileDone is the outcome of looking a reply up on the homeserver.
type ReconcileDone struct {
	EventID      string
	Found        bool
	ReplyEventID string
	Err          *messages.Error
	RetryAfter   time.Duration
	// LookedAt is when the lookup began.
	LookedAt time.Time
	// QuietSince is the latest moment a request for this room may still
	// have been on its way, as far as this process knows: its start
	// (earlier processes' requests ended by then), the end of the room's
	// last send, or the room's last failed lookup (the homeserver may
	// have restarted with requests queued). A miss counts only if the
	// lookup began Policy.SettleDelay after it.
	QuietSince time.Time
	// LateStoreFrom is set when the homeserver may have restarted since
	// the room's last send in this process began (a /sync failed): that
	// send may then be stored up to Policy.LateStoreWindow after it
	// ended, which LateStoreFrom is. Zero otherwise.
	LateStoreFrom time.Time
	// TroubleAt is the last moment the homeserver may have restarted, as
	// far as this process knows: when its /sync last recovered (the
	// process's first successful /sync counts: the homeserver may have
	// restarted while Lisa was down), or the lookup's end while the
	// /sync is failing. A homeserver that restarts redelivers a send it
	// had queued up to Policy.LateStoreWindow after it came back, and
	// every restart during that wait starts it again; so a reply held for
	// a late store stays held until LateStoreWindow after TroubleAt.
	TroubleAt time.Time
	// NoSendHere is set when this process has not sent in this room yet:
	// a ready reply in doubt was then in the hands of an earlier process,
	// which may have died with its send on the way, and the homeserver
	// may have restarted while Lisa was down, unseen. A miss of such a
	// reply counts only LateStoreWindow after TroubleAt.
	NoSendHere bool
}

// ResendDue: the delay before the next send or lookup has passed.
type ResendDue struct{ EventID string }

// AnsweredChecked is the outcome of CheckAnswered: ReplyEventID is Lisa's
// earlier reply to EventID, or empty if she has none.
type AnsweredChecked struct {
	EventID      string
	ReplyEventID string
	Err          *messages.Error
	RetryAfter   time.Duration
}

func (AnsweredChecked) isInput() {}

// ReactionDue: an invocation has been pending for Policy.WaitReactionAfter.
type ReactionDue struct{ EventID string }

// ReactionDone is the outcome of putting the wait reaction on EventID.
type ReactionDone struct {
	EventID         string
	ReactionEventID string
	Err             *messages.Error
	// RetryAfter is the wait a rate limit asked for (retry_after_ms).
	RetryAfter time.Duration
}

// RedactDue: the pause before the next redaction has passed.
type RedactDue struct{}

// RedactDone is the outcome of redacting one of Lisa's events.
type RedactDone struct {
	EventID    string
	Err        *messages.Error
	RetryAfter time.Duration
}

// FindDone is the outcome of looking for Lisa's events of Kind that
// relate to EventID (see FindToRedact): Found holds their event IDs.
type FindDone struct {
	EventID, Kind string
	Found         []string
	Err           *messages.Error
	RetryAfter    time.Duration
}

// FindDue: the pause before the next lookup has passed.
type FindDue struct{}

func (FindDone) isInput()     {}
func (FindDue) isInput()      {}
func (ReactionDue) isInput()  {}
func (ReactionDone) isInput() {}
func (RedactDue) isInput()    {}
func (RedactDone) isInput()   {}

func (Recovered) isInput()      {}
func (InboxLoaded) isInput()    {}
func (SlotGranted) isInput()    {}
func (InvocationDone) isInput() {}
func (InvocationLost) isInput() {}
func (RetryDue) isInput()       {}
func (SendDone) isInput()       {}
func (ReconcileDone) isInput()  {}
func (ResendDue) isInput()      {}

// Effect is something the machine asks the adapter to do.
type Effect interface{ isEffect() }

// LoadInbox: read the room's inbox and feed it back as InboxLoaded.
type LoadInbox struct{}

// RemoveInbox: delete an inbox entry whose journal event is persisted but
// did not take the entry itself (a duplicate, or a candidate of another
// room), or one the room ignores without a journal event. Outcome, when
// set, says why the entry was ignored (OutcomeEdit), for the log.
type RemoveInbox struct {
	EventID string
	Outcome string
}

// OutcomeEdit is the outcome of an edit the room ignores: an edit of an
// invocation that has started or ended, another member's edit, or an
// edit of a message that is no invocation. An edit is never an
// invocation.
const OutcomeEdit = "edit"

// OutcomeEditRedaction is the outcome of a redaction of an edit the room
// knows of: no reply of Lisa's relates to an edit, so nothing is looked
// up or redacted (the edit's invocation keeps its text).
const OutcomeEditRedaction = "edit_redaction"

// RequestSlot: ask the rooms supervisor for a concurrency slot.
type RequestSlot struct{}

// ReleaseSlot: return the concurrency slot.
type ReleaseSlot struct{}

// StartInvocation: run one attempt in an invocation child.
type StartInvocation struct {
	Candidate *roompb.Candidate
	Attempt   uint32
	// Deadline bounds the attempt (zero: only the child's own timeout).
	Deadline time.Time
}

// SendReply: send Content with TxnID; report SendDone.
type SendReply struct {
	EventID string
	TxnID   string
	Content []byte
}

// Reconcile: look for a reply already on the homeserver; report
// ReconcileDone.
type Reconcile struct {
	EventID string
	TxnID   string
}

// CheckAnswered asks whether Lisa already answered the queued question
// EventID although the journal does not say so: the journal (or inbox)
// that queued it predates this process, and may be older than the room —
// a restored backup, a rolled-back VM snapshot — with a later process's
// reply lost from it. The adapter waits for the sync's first commit of
// this process, asks the bot-event ledger (which then holds her replies
// since the cursor), then the homeserver (FindReply, TxnID), and reports
// AnsweredChecked.
type CheckAnswered struct {
	EventID string
	TxnID   string
}

func (CheckAnswered) isEffect() {}

// RecordBotEvent: remember that Lisa sent ReplyEventID.
type RecordBotEvent struct{ ReplyEventID, InReplyTo string }

// Schedule: deliver Input after a delay.
type Schedule struct {
	After time.Duration
	Input Input
}

// SendReaction puts the wait reaction Key on the invoking message EventID.
type SendReaction struct {
	EventID, Key, TxnID string
}

// Redact redacts one of Lisa's events (a wait reaction, or a reply whose
// question was redacted).
type Redact struct {
	EventID, TxnID string
}

// CancelInvocation stops the running attempt: its invocation is gone.
type CancelInvocation struct{}

// FindToRedact looks on the homeserver for Lisa's events of Kind
// (LookupReply: her reply, also by TxnID; LookupReaction: her wait
// reaction Key) that relate to the question EventID; report FindDone.
type FindToRedact struct {
	EventID, Kind, TxnID, Key string
}

func (FindToRedact) isEffect() {}

func (SendReaction) isEffect()     {}
func (Redact) isEffect()           {}
func (CancelInvocation) isEffect() {}

func (LoadInbox) isEffect()       {}
func (RemoveInbox) isEffect()     {}
func (RequestSlot) isEffect()     {}
func (ReleaseSlot) isEffect()     {}
func (StartInvocation) isEffect() {}
func (SendReply) isEffect()       {}
func (Reconcile) isEffect()       {}
func (RecordBotEvent) isEffect()  {}
func (Schedule) isEffect()        {}

// Describe renders an event or effect as one stable line for golden tests
// and the debug shell. It never includes message bodies.
func Describe(v any) string {
	switch v := v.(type) {
	case *roompb.InvocationQueued:
		return fmt.Sprintf("InvocationQueued %s trigger=%s", v.GetCandidate().GetEventId(), v.GetCandidate().GetTrigger())
	case *roompb.InvocationDuplicate:
		return "InvocationDuplicate " + v.GetEventId()
	case *roompb.InvocationRefused:
		return fmt.Sprintf("InvocationRefused %s reason=%s notice=%v", v.GetCandidate().GetEventId(), v.GetReason(), len(v.GetNoticeContent()) > 0)
	case *roompb.InvocationStarted:
		return fmt.Sprintf("InvocationStarted %s attempt=%d", v.GetEventId(), v.GetAttempt())
	case *roompb.InvocationFailed:
		return fmt.Sprintf("InvocationFailed %s attempt=%d code=%s permanent=%v", v.GetEventId(), v.GetAttempt(), v.GetCode(), v.GetPermanent())
	case *roompb.ReplyReady:
		return fmt.Sprintf("ReplyReady %s txn=%s error=%v bytes=%d", v.GetEventId(), v.GetTxnId(), v.GetIsError(), len(v.GetContent()))
	case *roompb.ReplyHeld:
		return fmt.Sprintf("ReplyHeld %s until=%d", v.GetEventId(), v.GetUntilMs())
	case *roompb.ReplySent:
		return fmt.Sprintf("ReplySent %s reply=%s reconciled=%v", v.GetEventId(), v.GetReplyEventId(), v.GetReconciled())
	case *roompb.ReplyAbandoned:
		return fmt.Sprintf("ReplyAbandoned %s code=%s", v.GetEventId(), v.GetCode())
	case *roompb.InvocationEdited:
		return fmt.Sprintf("InvocationEdited %s edit=%s", v.GetEventId(), v.GetEditEventId())
	case *roompb.InvocationRedacted:
		d := fmt.Sprintf("InvocationRedacted %s redaction=%s reply=%s", v.GetEventId(), v.GetRedactionEventId(), v.GetReplyEventId())
		if v.GetReplyMayExist() {
			d += " reply_may_exist"
		}
		if v.GetFindReply() {
			d += " find_reply"
		}
		return d
	case *roompb.ReactionSent:
		return fmt.Sprintf("ReactionSent %s reaction=%s", v.GetEventId(), v.GetReactionEventId())
	case *roompb.Redacted:
		return fmt.Sprintf("Redacted %s code=%s", v.GetEventId(), v.GetCode())
	case *roompb.InvocationDropped:
		if v.GetCode() != "" {
			return "InvocationDropped " + v.GetEventId() + " code=" + v.GetCode()
		}
		return "InvocationDropped " + v.GetEventId()
	case *roompb.ReactionRequested:
		return "ReactionRequested " + v.GetEventId()
	case *roompb.ReplyForbidden:
		return fmt.Sprintf("ReplyForbidden %s code=%s", v.GetEventId(), v.GetCode())
	case *roompb.HeldReleased:
		return fmt.Sprintf("HeldReleased %s reason=%s cause=%s", strings.Join(v.GetEventIds(), ","), v.GetReason(), v.GetCauseEventId())
	case *roompb.HeldDropped:
		return fmt.Sprintf("HeldDropped %s reason=%s", v.GetEventId(), v.GetReason())
	case *roompb.LookupDone:
		return fmt.Sprintf("LookupDone %s kind=%s found=%s code=%s", v.GetEventId(), v.GetKind(), strings.Join(v.GetFoundEventIds(), ","), v.GetCode())
	case FindToRedact:
		return fmt.Sprintf("FindToRedact %s kind=%s", v.EventID, v.Kind)
	case SendReaction:
		return fmt.Sprintf("SendReaction %s key=%s txn=%s", v.EventID, v.Key, v.TxnID)
	case Redact:
		return fmt.Sprintf("Redact %s txn=%s", v.EventID, v.TxnID)
	case StartInvocation:
		return fmt.Sprintf("StartInvocation %s attempt=%d", v.Candidate.GetEventId(), v.Attempt)
	case SendReply:
		return fmt.Sprintf("SendReply %s txn=%s", v.EventID, v.TxnID)
	case Reconcile:
		return fmt.Sprintf("Reconcile %s txn=%s", v.EventID, v.TxnID)
	case CheckAnswered:
		return "CheckAnswered " + v.EventID
	case RemoveInbox:
		if v.Outcome != "" {
			return fmt.Sprintf("RemoveInbox %s outcome=%s", v.EventID, v.Outcome)
		}
		return "RemoveInbox " + v.EventID
	case RecordBotEvent:
		return fmt.Sprintf("RecordBotEvent %s for %s", v.ReplyEventID, v.InReplyTo)
	case Schedule:
		return fmt.Sprintf("Schedule %s after=%s", inputName(v.Input), v.After)
	default:
		return fmt.Sprintf("%T", v)
	}
}

func inputName(in Input) string {
	return fmt.Sprintf("%T", in)
}
