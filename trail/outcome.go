package trail

import "strings"

// Outcome is what became of an event. The set is closed: every code is
// one of the constants below, or FailedPrefix followed by an error code
// of package messages.
type Outcome string

// Outcome codes.
const (
	// Invoked: the event invokes Lisa; its invocation is queued or under
	// way (see the entry's path).
	Invoked Outcome = "invoked"
	// Answered: Lisa's answer to the event is on the homeserver.
	Answered Outcome = "answered"
	// NotAddressed: a text message that neither mentions Lisa nor replies
	// to one of her messages.
	NotAddressed Outcome = "not_addressed"
	// OwnEvent: one of Lisa's own events.
	OwnEvent Outcome = "own_event"
	// Edit: an edit (m.replace). An edit never invokes Lisa; an edit of a
	// queued question changes the text she answers (see the question's
	// path).
	Edit Outcome = "edit"
	// Notice: an m.notice message (bots talk in notices; Lisa never
	// answers one).
	Notice Outcome = "notice"
	// NotText: a message that is not text (an image, a file, an emote …).
	NotText Outcome = "not_text"
	// Malformed: an event Lisa cannot read (no body, broken content).
	Malformed Outcome = "malformed"
	// BeforeBaseline: an event of the first sync (or of a new baseline
	// after the homeserver refused the cursor): history, never answered.
	BeforeBaseline Outcome = "before_baseline"
	// ReplyTargetInvalid: a reply to something that cannot be an event ID.
	ReplyTargetInvalid Outcome = "reply_target_invalid"
	// ReplyTargetRejected: the homeserver refused for good to show the
	// replied-to event, so it is not taken as a reply to Lisa.
	ReplyTargetRejected Outcome = "reply_target_rejected"
	// ReplyLookupAbandoned: the replied-to event could not be looked up
	// for too long; the event was taken as not a reply to Lisa.
	ReplyLookupAbandoned Outcome = "reply_lookup_abandoned"
	// RefusedSenderRate: the sender had used up their invocations for the
	// window (runtime.sender_rate_limit).
	RefusedSenderRate Outcome = "refused_sender_rate"
	// RefusedQueueFull: the room's queue was full
	// (runtime.room_queue_limit).
	RefusedQueueFull Outcome = "refused_queue_full"
	// Redacted: the event was redacted, before Lisa answered it (nothing
	// is answered) or after (her reply is redacted too).
	Redacted Outcome = "redacted"
	// Redaction: a redaction event.
	Redaction Outcome = "redaction"
	// Held: the homeserver refused Lisa's reply with M_FORBIDDEN; it is
	// held until her power to post or her membership changes, or an
	// operator runs resend (at most 24 h, 20 per room).
	Held Outcome = "held"
	// RefusedBudget: a token budget was spent and the room had had its
	// budget notice that day (llm.daily_token_budget,
	// llm.room_daily_token_budget); no reply.
	RefusedBudget Outcome = "refused_budget"
	// FailedPrefix starts the outcome of an invocation that ended without
	// an answer: "failed:" and the error code of its last attempt (the
	// persona's error message was sent instead), or of the homeserver's
	// refusal of the reply.
	FailedPrefix = "failed:"
)

// Outcomes lists every fixed outcome code, for documentation and tests.
var Outcomes = []Outcome{Invoked, Answered, NotAddressed, OwnEvent, Edit, Notice, NotText, Malformed,
	BeforeBaseline, ReplyTargetInvalid, ReplyTargetRejected, ReplyLookupAbandoned,
	RefusedSenderRate, RefusedQueueFull, Redacted, Redaction, Held, RefusedBudget}

// Failed returns the outcome of an invocation that failed with code.
func Failed(code string) Outcome {
	if code == "" {
		code = "internal"
	}
	return Outcome(FailedPrefix + code)
}

// IsFailed reports whether o is a failed:<code> outcome.
func (o Outcome) IsFailed() bool { return strings.HasPrefix(string(o), FailedPrefix) }

// Final reports whether o ends the event's story: anything but Invoked.
func (o Outcome) Final() bool { return o != Invoked }

// Verdicts of the sync's classifier (adapters/matrix), as the trail maps
// them. They are repeated here as plain strings: the trail reads what the
// sync decided, whatever adapter decided it.
var verdictOutcomes = map[string]Outcome{
	"mention":                Invoked,
	"alias":                  Invoked,
	"reply":                  Invoked,
	"edit_update":            Edit,
	"edit":                   Edit,
	"redaction":              Redaction,
	"redaction_of_other":     Redaction,
	"malformed":              Malformed,
	"own_event":              OwnEvent,
	"redacted":               Redacted,
	"not_addressed":          NotAddressed,
	"reply_target_invalid":   ReplyTargetInvalid,
	"reply_target_rejected":  ReplyTargetRejected,
	"reply_lookup_abandoned": ReplyLookupAbandoned,
	"baseline":               BeforeBaseline,
}

// FromVerdict maps a classifier verdict and the event's kind to an
// outcome. A verdict it does not know (a new one nobody mapped yet)
// becomes Malformed for a message of no known kind and NotText
// otherwise, so the set stays closed.
func FromVerdict(verdict, kind string) Outcome {
	if verdict == "not_text_message" {
		if kind == "notice" {
			return Notice
		}
		return NotText
	}
	if o, ok := verdictOutcomes[verdict]; ok {
		return o
	}
	if kind == "text" {
		return Malformed
	}
	return NotText
}
