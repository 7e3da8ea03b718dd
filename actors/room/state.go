package room

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// RecentLimit bounds how many finished invocation event IDs a room keeps to
// recognise repeated inbox entries. The sync ledger never routes an event
// twice, so this only has to cover the hand-over from inbox to journal.
const RecentLimit = 256

// LookupLimit bounds how many of Lisa's events a room keeps to find on the
// homeserver and redact (State.Lookups). Each comes from a member's
// redaction of a question answered long ago, or from a wait reaction whose
// request was never confirmed. Beyond the limit the oldest (but the one in
// flight) is dropped: the machine journals it as LookupDone with the code
// LookupDropped as soon as the step that went past the limit is applied,
// so Lookups holds at most LookupLimit after every step.
const LookupLimit = 64

// LookupDropped is the code of a LookupDone that dropped a lookup because
// the room held more than LookupLimit: what it was to find stays
// unredacted.
const LookupDropped = "lookup_dropped"

// HeldLimit bounds the replies a room holds after the homeserver refused
// them with M_FORBIDDEN (State.Held): beyond it the oldest is dropped,
// journaled as HeldDropped with the reason HeldOverflow, as soon as the
// step that went past the limit is applied.
const HeldLimit = 20

// HeldTTL bounds how long a refused reply is held: one held longer is
// dropped (HeldDropped, HeldExpired) rather than sent into a conversation
// that has long moved on.
const HeldTTL = 24 * time.Hour

// Reasons of HeldDropped and HeldReleased.
const (
	HeldOverflow = "overflow"
	HeldExpired  = "expired"
	// ReleaseOperator (besides messages.TriggerPowerLevels and
	// messages.TriggerMembership, the triggers of the inbox entries that
	// carry a change of the room's permissions): the operator ran `resend` in lisa shell.
	ReleaseOperator = "operator"
)

// Kinds of State.Lookups.
const (
	// LookupReply: the reply to a question answered too long ago for the
	// room to remember it (RecentLimit).
	LookupReply = "reply"
	// LookupReaction: the wait reaction on a question, requested but
	// never confirmed.
	LookupReaction = "reaction"
)

// Lookup is one of Lisa's events to find on the homeserver and redact:
// the Kind of event that relates to the question EventID.
type Lookup struct{ EventID, Kind string }

// Invocation is one queued, running or ready invocation.
type Invocation struct {
	Candidate  *roompb.Candidate
	QueuedAtMs int64
	Attempts   uint32
	// FirstStartedAtMs is when the first attempt started (0: not yet).
	FirstStartedAtMs int64
	// ReadyAtMs is when the reply was fixed (0: not yet).
	ReadyAtMs int64
	// HeldUntilMs is when the reply may be sent again at the earliest
	// (ReplyHeld; 0: not held).
	HeldUntilMs int64
	LastCode    string
	Ready       bool
	TxnID       string
	Content     []byte
	IsError     bool
	// Notice marks the overload notice of a refused candidate.
	Notice bool
	// ReactionEventID is the wait reaction on the invoking message
	// (ReactionSent); it is redacted when the invocation ends.
	ReactionEventID string
	// Redacted marks an invocation whose message was redacted after its
	// reply was fixed, or while a restarted room looked up whether its
	// reply went out before the restart: it is never sent again, and a
	// reply that was sent or is found is redacted.
	Redacted bool
	// ReactionRequested is set once the wait reaction was requested
	// (ReactionRequested): it is never requested again, and if it is not
	// confirmed (ReactionSent) it is looked up when the invocation ends.
	ReactionRequested bool
	// ForbiddenAtMs is when the homeserver refused the reply with
	// M_FORBIDDEN (ReplyForbidden; 0: never).
	ForbiddenAtMs int64
	// Recheck marks a held reply that was released (HeldReleased): it is
	// looked up on the homeserver before it is sent again.
	Recheck bool
}

// EventID returns the invoking event's ID.
func (i *Invocation) EventID() string { return i.Candidate.GetEventId() }

// State is the durable state of a room: exactly what replaying its journal
// yields.
type State struct {
	// NextIndex mirrors the journal index of the next event.
	NextIndex uint64
	// Queue holds unfinished invocations, oldest first. Only the head runs.
	Queue []*Invocation
	// Recent holds the event IDs of the latest finished invocations.
	Recent []string
	// RecentReplies holds, parallel to Recent, the event ID of the reply
	// sent for each ("" when none was).
	RecentReplies []string
	// PendingRedactions are Lisa's events still to be redacted (wait
	// reactions of finished invocations, replies to redacted questions),
	// oldest first.
	PendingRedactions []string
	// Lookups are Lisa's events still to be found on the homeserver and
	// redacted, oldest first, at most LookupLimit after every step (see
	// LookupLimit).
	Lookups []Lookup
	// Held are the replies the homeserver refused with M_FORBIDDEN, out
	// of the queue, oldest first, waiting to be released (HeldReleased),
	// at most HeldLimit after every step.
	Held []*Invocation
	// Counters.
	Answered, FailedAttempts, Abandoned, Duplicates, Refused uint64
	// Edited counts invocations whose text an edit replaced; Redacted
	// counts invocations whose message was redacted.
	Edited, Redacted uint64
	// NoticeAtMs is when the latest overload notice was queued (see
	// roompb.InvocationRefused).
	NoticeAtMs int64
	// LastReplyAtMs is when the latest reply was confirmed sent.
	LastReplyAtMs int64
}

// Head returns the invocation at the front of the queue, or nil.
func (s *State) Head() *Invocation {
	if len(s.Queue) == 0 {
		return nil
	}
	return s.Queue[0]
}

// Knows reports whether eventID is queued or recently finished.
func (s *State) Knows(eventID string) bool {
	for _, inv := range s.Queue {
		if inv.EventID() == eventID {
			return true
		}
	}
	for _, id := range s.Recent {
		if id == eventID {
			return true
		}
	}
	return s.HeldReply(eventID) != nil
}

// HeldReply returns the held reply of eventID, or nil.
func (s *State) HeldReply(eventID string) *Invocation {
	for _, inv := range s.Held {
		if inv.EventID() == eventID {
			return inv
		}
	}
	return nil
}

// Reply returns the reply sent for a recently finished invocation, or "".
func (s *State) Reply(eventID string) string {
	for i := len(s.Recent) - 1; i >= 0; i-- {
		if s.Recent[i] == eventID {
			if i < len(s.RecentReplies) {
				return s.RecentReplies[i]
			}
			return ""
		}
	}
	return ""
}

// Queued returns the unfinished invocation of eventID, or nil.
func (s *State) Queued(eventID string) *Invocation {
	for _, inv := range s.Queue {
		if inv.EventID() == eventID {
			return inv
		}
	}
	return nil
}

func (s *State) find(eventID string) (*Invocation, error) {
	for _, inv := range s.Queue {
		if inv.EventID() == eventID {
			return inv, nil
		}
	}
	return nil, fmt.Errorf("room: journal names unknown invocation %s", messages.Hash(eventID))
}

// finish removes a finished invocation from the queue and remembers it
// with its reply (replyID, "" if none). Its wait reaction, and the reply
// itself if its question was redacted meanwhile, are to be redacted.
func (s *State) finish(eventID, replyID string) error {
	for i, inv := range s.Queue {
		if inv.EventID() == eventID {
			s.Queue = append(s.Queue[:i:i], s.Queue[i+1:]...)
			s.remember(eventID, replyID)
			s.endReaction(inv)
			if inv.Redacted && replyID != "" {
				s.PendingRedactions = append(s.PendingRedactions, replyID)
			}
			return nil
		}
	}
	return fmt.Errorf("room: journal finishes unknown invocation %s", messages.Hash(eventID))
}

// endReaction takes the wait reaction off an invocation that leaves the
// queue: it is to be redacted, or looked up if it was requested but never
// confirmed (the homeserver may hold it all the same: a lost response, a
// kill).
func (s *State) endReaction(inv *Invocation) {
	switch {
	case inv.ReactionEventID != "":
		s.PendingRedactions = append(s.PendingRedactions, inv.ReactionEventID)
	case inv.ReactionRequested:
		s.lookUp(Lookup{EventID: inv.EventID(), Kind: LookupReaction})
	}
	inv.ReactionEventID, inv.ReactionRequested = "", false
}

// hold moves a queued invocation whose reply the homeserver refused with
// M_FORBIDDEN out of the queue into Held. Its wait reaction ends as if
// the invocation had (it is redacted now, not when the reply goes out).
func (s *State) hold(eventID string, atMs int64) error {
	for i, inv := range s.Queue {
		if inv.EventID() == eventID {
			s.Queue = append(s.Queue[:i:i], s.Queue[i+1:]...)
			s.endReaction(inv)
			if inv.ForbiddenAtMs == 0 {
				// Refused again after a release: HeldTTL still counts
				// from the first refusal.
				inv.ForbiddenAtMs = atMs
			}
			inv.HeldUntilMs, inv.Recheck = 0, false
			s.Held = append(s.Held, inv)
			return nil
		}
	}
	return fmt.Errorf("room: journal holds unknown invocation %s", messages.Hash(eventID))
}

// release puts held replies back into the queue, right behind the head
// (which may be running), in the order given; each is looked up before
// it is sent again.
func (s *State) release(eventIDs []string) error {
	at := min(1, len(s.Queue))
	for _, id := range eventIDs {
		i := slices.IndexFunc(s.Held, func(inv *Invocation) bool { return inv.EventID() == id })
		if i < 0 {
			return fmt.Errorf("room: journal releases unknown held reply %s", messages.Hash(id))
		}
		inv := s.Held[i]
		s.Held = slices.Delete(s.Held, i, i+1)
		inv.Recheck = true
		s.Queue = slices.Insert(s.Queue, at, inv)
		at++
	}
	return nil
}

// dropHeld gives up a held reply: its invocation ends without a reply.
func (s *State) dropHeld(eventID string) bool {
	i := slices.IndexFunc(s.Held, func(inv *Invocation) bool { return inv.EventID() == eventID })
	if i < 0 {
		return false
	}
	s.Held = slices.Delete(s.Held, i, i+1)
	s.remember(eventID, "")
	return true
}

// remember notes a finished invocation's event ID, and its reply's, among
// the recent ones.
func (s *State) remember(eventID, replyID string) {
	// Older snapshots have no replies: align before appending.
	for len(s.RecentReplies) < len(s.Recent) {
		s.RecentReplies = append(s.RecentReplies, "")
	}
	s.Recent = append(s.Recent, eventID)
	s.RecentReplies = append(s.RecentReplies, replyID)
	if len(s.Recent) > RecentLimit {
		s.Recent = append([]string(nil), s.Recent[len(s.Recent)-RecentLimit:]...)
		s.RecentReplies = append([]string(nil), s.RecentReplies[len(s.RecentReplies)-RecentLimit:]...)
	}
}

// Apply folds one journal event into the state. It is deterministic and
// does no IO; an error means the journal contradicts itself.
func (s *State) Apply(ev proto.Message) error {
	s.NextIndex++
	switch e := ev.(type) {
	case *roompb.InvocationQueued:
		s.Queue = append(s.Queue, &Invocation{Candidate: e.GetCandidate(), QueuedAtMs: e.GetQueuedAtMs()})
	case *roompb.InvocationDuplicate:
		s.Duplicates++
	case *roompb.InvocationRefused:
		s.Refused++
		c := e.GetCandidate()
		if len(e.GetNoticeContent()) == 0 {
			s.remember(c.GetEventId(), "")
			break
		}
		// The notice goes right behind the head, which may be running:
		// the flood it answers must not delay it further.
		notice := &Invocation{
			Candidate: c, QueuedAtMs: e.GetRefusedAtMs(), ReadyAtMs: e.GetRefusedAtMs(),
			Ready: true, IsError: true, Notice: true, TxnID: e.GetNoticeTxnId(), Content: e.GetNoticeContent(),
		}
		s.Queue = slices.Insert(s.Queue, min(1, len(s.Queue)), notice)
		s.NoticeAtMs = e.GetRefusedAtMs()
	case *roompb.InvocationStarted:
		inv, err := s.find(e.GetEventId())
		if err != nil {
			return err
		}
		inv.Attempts = e.GetAttempt()
		if inv.FirstStartedAtMs == 0 {
			inv.FirstStartedAtMs = e.GetStartedAtMs()
		}
	case *roompb.InvocationFailed:
		inv, err := s.find(e.GetEventId())
		if err != nil {
			return err
		}
		inv.LastCode = e.GetCode()
		s.FailedAttempts++
	case *roompb.ReplyReady:
		inv, err := s.find(e.GetEventId())
		if err != nil {
			return err
		}
		inv.Ready, inv.TxnID, inv.Content, inv.IsError = true, e.GetTxnId(), e.GetContent(), e.GetIsError()
		inv.ReadyAtMs = e.GetReadyAtMs()
	case *roompb.ReplyHeld:
		inv, err := s.find(e.GetEventId())
		if err != nil {
			return err
		}
		// A hold before the reply is fixed: an attempt's reply may have
		// been sent before a crash (see Output.Early); it is looked up,
		// not answered again, before the hold ends.
		inv.HeldUntilMs = max(inv.HeldUntilMs, e.GetUntilMs())
	case *roompb.ReplySent:
		if err := s.finish(e.GetEventId(), e.GetReplyEventId()); err != nil {
			return err
		}
		s.Answered++
		s.LastReplyAtMs = e.GetSentAtMs()
	case *roompb.ReplyAbandoned:
		if err := s.finish(e.GetEventId(), ""); err != nil {
			return err
		}
		s.Abandoned++
	case *roompb.ReplyForbidden:
		return s.hold(e.GetEventId(), e.GetRefusedAtMs())
	case *roompb.HeldReleased:
		return s.release(e.GetEventIds())
	case *roompb.HeldDropped:
		if !s.dropHeld(e.GetEventId()) {
			return fmt.Errorf("room: journal drops unknown held reply %s", messages.Hash(e.GetEventId()))
		}
		s.Abandoned++
	default:
		return s.applyRelation(ev)
	}
	return nil
}

// applyRelation folds the journal events about edits, redactions and
// reactions.
func (s *State) applyRelation(ev proto.Message) error {
	switch e := ev.(type) {
	case *roompb.InvocationEdited:
		inv, err := s.find(e.GetEventId())
		if err != nil {
			return err
		}
		c := proto.Clone(inv.Candidate).(*roompb.Candidate)
		c.Body, c.FormattedBody, c.EditEventId = e.GetBody(), e.GetFormattedBody(), e.GetEditEventId()
		inv.Candidate = c
		s.Edited++
	case *roompb.InvocationRedacted:
		s.Redacted++
		switch {
		case e.GetReplyEventId() != "":
			s.PendingRedactions = append(s.PendingRedactions, e.GetReplyEventId())
			return nil
		case e.GetFindReply():
			s.lookUp(Lookup{EventID: e.GetEventId(), Kind: LookupReply})
			return nil
		case s.dropHeld(e.GetEventId()):
			// A held reply to a question now gone: never sent.
			return nil
		}
		inv, err := s.find(e.GetEventId())
		if err != nil {
			return err
		}
		if inv.Ready || e.GetReplyMayExist() {
			// The reply may be on its way, or out already: it is never
			// sent again, and redacted once known.
			inv.Redacted = true
			break
		}
		return s.drop(inv)
	case *roompb.InvocationDropped:
		inv, err := s.find(e.GetEventId())
		if err != nil {
			return err
		}
		return s.drop(inv)
	case *roompb.ReactionRequested:
		inv, err := s.find(e.GetEventId())
		if err != nil {
			return err
		}
		inv.ReactionRequested = true
	case *roompb.ReactionSent:
		if inv := s.Queued(e.GetEventId()); inv != nil {
			inv.ReactionEventID = e.GetReactionEventId()
		} else {
			// The invocation ended while the reaction was on its way:
			// it is known now, no need to look for it.
			s.PendingRedactions = append(s.PendingRedactions, e.GetReactionEventId())
			s.Lookups = slices.DeleteFunc(s.Lookups, func(l Lookup) bool {
				return l == Lookup{EventID: e.GetEventId(), Kind: LookupReaction}
			})
		}
	case *roompb.LookupDone:
		done := Lookup{EventID: e.GetEventId(), Kind: e.GetKind()}
		s.Lookups = slices.DeleteFunc(s.Lookups, func(l Lookup) bool { return l == done })
		for _, id := range e.GetFoundEventIds() {
			if !slices.Contains(s.PendingRedactions, id) {
				s.PendingRedactions = append(s.PendingRedactions, id)
			}
		}
	case *roompb.Redacted:
		if i := slices.Index(s.PendingRedactions, e.GetEventId()); i >= 0 {
			s.PendingRedactions = slices.Delete(s.PendingRedactions, i, i+1)
		}
	default:
		return fmt.Errorf("room: unknown journal event %T", ev)
	}
	return nil
}

// lookUp adds l to the lookups, unless it is there. It does not enforce
// LookupLimit: the machine drops what is beyond it with a journal event
// (see Machine.dropLookups), so that no drop goes unlogged.
func (s *State) lookUp(l Lookup) {
	if slices.Contains(s.Lookups, l) {
		return
	}
	s.Lookups = append(s.Lookups, l)
}

// drop removes an invocation that will not be answered (its message was
// redacted before its reply was fixed, or a lookup found no reply it sent
// before a restart).
func (s *State) drop(inv *Invocation) error {
	return s.finish(inv.EventID(), "")
}

// Snapshot returns the state as its protobuf snapshot.
func (s *State) Snapshot() *roompb.RoomSnapshot {
	snap := &roompb.RoomSnapshot{
		NextEventIndex: s.NextIndex,
		Recent:         append([]string(nil), s.Recent...),
		Answered:       s.Answered,
		FailedAttempts: s.FailedAttempts,
		Abandoned:      s.Abandoned,
		Duplicates:     s.Duplicates,
		LastReplyAtMs:  s.LastReplyAtMs,
		Refused:        s.Refused,
		NoticeAtMs:     s.NoticeAtMs,

		RecentReplies:     append([]string(nil), s.RecentReplies...),
		PendingRedactions: append([]string(nil), s.PendingRedactions...),
		Redacted:          s.Redacted,
		Edited:            s.Edited,
	}
	for _, l := range s.Lookups {
		snap.Lookups = append(snap.Lookups, &roompb.PendingLookup{EventId: l.EventID, Kind: l.Kind})
	}
	for _, inv := range s.Queue {
		snap.Queue = append(snap.Queue, inv.snapshot())
	}
	for _, inv := range s.Held {
		snap.Held = append(snap.Held, inv.snapshot())
	}
	return snap
}

func (inv *Invocation) snapshot() *roompb.Invocation {
	return &roompb.Invocation{
		Candidate:  inv.Candidate,
		QueuedAtMs: inv.QueuedAtMs,
		Attempts:   inv.Attempts,
		TxnId:      inv.TxnID,
		Content:    inv.Content,
		Ready:      inv.Ready,
		IsError:    inv.IsError,
		LastCode:   inv.LastCode,

		FirstStartedAtMs: inv.FirstStartedAtMs,
		ReadyAtMs:        inv.ReadyAtMs,
		HeldUntilMs:      inv.HeldUntilMs,
		Notice:           inv.Notice,
		ReactionEventId:  inv.ReactionEventID,
		Redacted:         inv.Redacted,

		ReactionRequested: inv.ReactionRequested,
		ForbiddenAtMs:     inv.ForbiddenAtMs,
		Recheck:           inv.Recheck,
	}
}

func invocationFrom(inv *roompb.Invocation) *Invocation {
	return &Invocation{
		Candidate:  inv.GetCandidate(),
		QueuedAtMs: inv.GetQueuedAtMs(),
		Attempts:   inv.GetAttempts(),
		LastCode:   inv.GetLastCode(),
		Ready:      inv.GetReady(),
		TxnID:      inv.GetTxnId(),
		Content:    inv.GetContent(),
		IsError:    inv.GetIsError(),

		FirstStartedAtMs: inv.GetFirstStartedAtMs(),
		ReadyAtMs:        inv.GetReadyAtMs(),
		HeldUntilMs:      inv.GetHeldUntilMs(),
		Notice:           inv.GetNotice(),
		ReactionEventID:  inv.GetReactionEventId(),
		Redacted:         inv.GetRedacted(),

		ReactionRequested: inv.GetReactionRequested(),
		ForbiddenAtMs:     inv.GetForbiddenAtMs(),
		Recheck:           inv.GetRecheck(),
	}
}

// FromSnapshot rebuilds the state a snapshot describes.
func FromSnapshot(snap *roompb.RoomSnapshot) State {
	s := State{
		NextIndex:      snap.GetNextEventIndex(),
		Recent:         append([]string(nil), snap.GetRecent()...),
		Answered:       snap.GetAnswered(),
		FailedAttempts: snap.GetFailedAttempts(),
		Abandoned:      snap.GetAbandoned(),
		Duplicates:     snap.GetDuplicates(),
		LastReplyAtMs:  snap.GetLastReplyAtMs(),
		Refused:        snap.GetRefused(),
		NoticeAtMs:     snap.GetNoticeAtMs(),

		RecentReplies:     append([]string(nil), snap.GetRecentReplies()...),
		PendingRedactions: append([]string(nil), snap.GetPendingRedactions()...),
		Redacted:          snap.GetRedacted(),
		Edited:            snap.GetEdited(),
	}
	for _, l := range snap.GetLookups() {
		s.Lookups = append(s.Lookups, Lookup{EventID: l.GetEventId(), Kind: l.GetKind()})
	}
	for _, inv := range snap.GetQueue() {
		s.Queue = append(s.Queue, invocationFrom(inv))
	}
	for _, inv := range snap.GetHeld() {
		s.Held = append(s.Held, invocationFrom(inv))
	}
	return s
}
