package persistence

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// Journal stores each actor's events and snapshots under the actor's name.
// Indices are the positions protoactor's persistence plugin assigns.
type Journal interface {
	// AppendEvent stores ev at index. Writing an index twice is an error
	// (ErrConflict): it would mean an event was applied twice. An event
	// that takes an inbox entry into a journal (see [TakenFromInbox])
	// also removes that entry, in the same atomic write: a room needs one
	// durable write, not two, to take a mention in.
	AppendEvent(name string, index uint64, ev proto.Message) error
	// Events calls fn for each event with from <= index < to (to == 0 means
	// no bound) in index order. A missing index inside the range that
	// exists is reported as ErrGap.
	Events(name string, from, to uint64, fn func(index uint64, ev proto.Message) error) error
	// SaveSnapshot stores snap as the state before the event at index.
	SaveSnapshot(name string, index uint64, snap proto.Message) error
	// LatestSnapshot returns the newest snapshot of name.
	LatestSnapshot(name string) (snap proto.Message, index uint64, ok bool, err error)
	// DeleteEvents removes the events of name with index <= inclusiveTo.
	DeleteEvents(name string, inclusiveTo uint64) error
	// DeleteSnapshots removes the snapshots of name with index <= inclusiveTo.
	DeleteSnapshots(name string, inclusiveTo uint64) error
}

// Ledger is the sync actor's durable intake: the /sync cursor and the
// per-room inboxes of accepted candidates.
type Ledger interface {
	// Cursor returns the committed cursor; an empty one before the first
	// commit.
	Cursor() (*roompb.SyncCursor, error)
	// CommitSync atomically stores cur and appends each candidate whose
	// (room, event) was never routed before to its room's inbox (Badger
	// also refuses one sent before its retention floor, see
	// [Badger.SweepRetention]). It returns
	// the candidates it appended, with InboxSeq assigned. Either everything
	// is stored or nothing is.
	CommitSync(cur *roompb.SyncCursor, cands []*roompb.Candidate) ([]*roompb.Candidate, error)
	// Inbox returns a room's pending candidates in the order they were
	// committed.
	Inbox(room string) ([]*roompb.Candidate, error)
	// Routed reports whether (room, eventID) was ever routed to its
	// room's inbox (the marker outlives the entry); routing an edit that
	// invokes Lisa for the first time routes its original too.
	Routed(room, eventID string) (bool, error)
	// RemoveInbox deletes a room's pending candidate. Removing an absent
	// entry is not an error. The routed marker stays, so a later sync
	// response carrying the same event does not route it again.
	RemoveInbox(room, eventID string) error
}

// TakenFromInbox names the inbox entry a journal event takes in: a queued
// or refused invocation consumes its candidate's entry, an applied edit or
// redaction the edit's or redaction's entry, a release of held replies the
// entry of the permission change that caused it. ok is false for every other
// event.
func TakenFromInbox(ev proto.Message) (room, eventID string, ok bool) {
	switch e := ev.(type) {
	case *roompb.InvocationQueued:
		room, eventID = e.GetCandidate().GetRoomId(), e.GetCandidate().GetEventId()
	case *roompb.InvocationRefused:
		room, eventID = e.GetCandidate().GetRoomId(), e.GetCandidate().GetEventId()
	case *roompb.InvocationEdited:
		room, eventID = e.GetRoomId(), e.GetEditEventId()
	case *roompb.InvocationRedacted:
		room, eventID = e.GetRoomId(), e.GetRedactionEventId()
	case *roompb.HeldReleased:
		// Released by a change of the room's permissions the sync
		// routed (none for the operator's resend).
		room, eventID = e.GetRoomId(), e.GetCauseEventId()
	}
	if room == "" || eventID == "" {
		return "", "", false
	}
	return room, eventID, true
}

// BotEvents records the events Lisa sent, so replies to Lisa are recognised
// without asking the homeserver.
type BotEvents interface {
	// RecordBotEvent notes that Lisa sent eventID in room in answer to
	// inReplyTo.
	RecordBotEvent(room, eventID, inReplyTo string) error
	// IsBotEvent reports whether Lisa sent eventID in room.
	IsBotEvent(room, eventID string) (bool, error)
	// RepliedTo returns the event Lisa sent in room in answer to
	// invoking, as recorded by RecordBotEvent, or "" if none is known.
	// It is how a data dir older than the room (a restored backup)
	// recognises the questions it answered after the copy was taken.
	RepliedTo(room, invoking string) (string, error)
}

// Store is everything Lisa keeps on disk.
type Store interface {
	Journal
	Ledger
	BotEvents
	// Sync returns once every write acknowledged before the call is on
	// disk, safe from a power failure. Every acknowledged write survives a
	// kill of the process, and writes are durable in the order they were
	// acknowledged. RemoveInbox and snapshots are durable when
	// acknowledged; CommitSync, journal events and bot events may wait for
	// the next Sync, so a caller about to do something outside the store
	// that the store must know of (ask the model about a mention, send a
	// reply) calls Sync first.
	Sync() error
	// Barrier returns a function that returns once every write
	// acknowledged before Barrier was called is on disk: a caller marks
	// the point now and waits later, off its own path, without waiting
	// for writes made in between.
	Barrier() func() error
	// Close releases the store. It is safe to call more than once.
	Close() error
}

// Sentinel errors. Wrapped errors carry the actor or room and index.
var (
	// ErrGap reports a missing journal index: replaying past it would
	// produce a state that never existed.
	ErrGap = errors.New("persistence: journal gap")
	// ErrConflict reports a second write to the same journal index.
	ErrConflict = errors.New("persistence: journal index already written")
	// ErrCorrupt reports a stored value that cannot be decoded.
	ErrCorrupt = errors.New("persistence: corrupt record")
	// ErrClosed reports use of a closed store.
	ErrClosed = errors.New("persistence: store closed")
)

func gapError(name string, want, got uint64) error {
	return fmt.Errorf("%w: %s expected index %d, found %d", ErrGap, messages.ActorLogID(name), want, got)
}

func validateCandidate(c *roompb.Candidate) error {
	if c.GetRoomId() == "" || c.GetEventId() == "" {
		return fmt.Errorf("persistence: candidate needs room and event IDs")
	}
	return nil
}
