package messages

import "github.com/lisabot/lisa/messages/roompb"

// Commands exchanged between actors. They are plain Go values, never
// persisted.

// Nudge tells a room that its inbox has new entries. The rooms supervisor
// forwards it to the room's actor.
type Nudge struct {
	Room RoomID
	// Entries, if set, are the entries the commit that sent the nudge
	// added to the room's inbox (InboxSeq assigned), so the room need not
	// read them back from the store. Nil: read the inbox. Shared, never
	// modified.
	Entries []*roompb.Candidate
}

// AcquireSlot asks the rooms supervisor for one of the max_concurrent_rooms
// slots. Token identifies the request; the grant echoes it.
type AcquireSlot struct {
	Token uint64
}

// SlotGranted answers AcquireSlot.
type SlotGranted struct {
	Token uint64
}

// ReleaseSlot returns the slot granted for Token.
type ReleaseSlot struct {
	Token uint64
}

// InvocationResult is an invocation child's report to its room: Content is
// the exact reply content on success; Err is set on failure.
type InvocationResult struct {
	EventID EventID
	Attempt uint32
	Content []byte
	Err     *Error
	// Stats counts what the attempt did (for the event trail); it is
	// never persisted.
	Stats AttemptStats
}

// AttemptStats counts one invocation attempt's work: answered LLM
// requests and tool calls by outcome ("ok" or a failure code).
type AttemptStats struct {
	LLMRequests int
	Tools       map[string]int
}

// SlotStatusRequest asks the rooms supervisor for its limiter state.
type SlotStatusRequest struct{}

// SlotStatus answers SlotStatusRequest.
type SlotStatus struct {
	Limit   int
	Holders []string
	Waiting []string
	// MaxHeld is the largest number of slots ever held at once.
	MaxHeld int
}

// RoomStatusRequest asks a room actor for its state summary.
type RoomStatusRequest struct{}

// RoomStatus answers RoomStatusRequest. It carries no message bodies.
type RoomStatus struct {
	Room      RoomID
	Phase     string
	Queue     []EventID
	Attempts  uint32
	SlotHeld  bool
	NextIndex uint64
	Answered  uint64
	Abandoned uint64
	Failed    uint64
	// Digest is a deterministic rendering of the durable state, equal for
	// equal states; tests compare live and replayed rooms with it.
	Digest string
	// Invocations describes the queue, head first.
	Invocations []InvocationStatus
	// LastReplyAtMs is when the latest reply was confirmed (0: never).
	LastReplyAtMs int64
	// Held are the replies the homeserver refused with M_FORBIDDEN,
	// waiting for the room to be fixed, oldest first.
	Held []HeldStatus
}

// HeldStatus describes one held reply, without its content.
type HeldStatus struct {
	EventID EventID
	// ForbiddenAtMs is when the homeserver first refused it.
	ForbiddenAtMs int64
	// ErrorReply: the reply is the persona's error message.
	ErrorReply bool
}

// ResendHeldRequest asks a room actor to send its held replies again (the
// operator's resend): each is looked up first, then sent once with its
// original transaction ID. The room answers with *ResendHeldResult.
type ResendHeldRequest struct{}

// ResendHeldResult answers ResendHeldRequest.
type ResendHeldResult struct {
	Room RoomID
	// Released counts the held replies that went back to be sent.
	Released int
	// Live is false when the room was still replaying its journal:
	// nothing was released.
	Live bool
}

// InvocationStatus describes one queued invocation, without its body.
type InvocationStatus struct {
	EventID    EventID
	Attempts   uint32
	Ready      bool
	QueuedAtMs int64
	ReadyAtMs  int64
	LastCode   string
}

// RoomsStatusRequest asks the rooms supervisor which rooms are running.
type RoomsStatusRequest struct{}

// RoomsStatus answers RoomsStatusRequest: false for a room stopped after
// repeated failures and waiting to be respawned.
type RoomsStatus struct {
	Running map[RoomID]bool
}

// SyncBatch is one /sync response after classification: the cursor to
// commit and what it carried for Lisa.
type SyncBatch struct {
	// Cursor is committed together with Candidates.
	Cursor *roompb.SyncCursor
	// Candidates are the accepted invocations, in server order.
	Candidates []*roompb.Candidate
	// OwnEvents are Lisa's own messages seen in the timeline.
	OwnEvents []OwnEvent
	// Rejected counts rejected timeline events by reason.
	Rejected map[string]int
	// GapRooms lists rooms whose limited timeline could not be back-filled
	// to the last seen event within gap_page_limit pages.
	GapRooms []RoomID
	// Seen lists each timeline event of an allowed room the answer
	// carried, with the classifier's verdict, in server order (the event
	// trail reads it); never a body or a display name.
	Seen []SeenEvent
	// NotAllowed counts, per room that is not allowed, the timeline events
	// the answer carried and Lisa did not read.
	NotAllowed map[string]int
}

// SeenEvent is one timeline event as the sync classified it.
type SeenEvent struct {
	Room    string
	EventID string
	Sender  string
	// Kind is the message type without "m." ("text", "notice", …),
	// "edit", "redaction" or the event type for anything else.
	Kind string
	// Verdict is the classifier's verdict, or "baseline" for an event of
	// the baseline answer.
	Verdict string
	// OriginTsMs is the homeserver's timestamp of the event.
	OriginTsMs int64
}

// OwnEvent is one of Lisa's messages seen in a timeline.
type OwnEvent struct {
	Room          RoomID
	EventID       EventID
	InReplyTo     EventID
	TransactionID TxnID
}

// ResetSlots tells the rooms supervisor that the sending room (a new
// incarnation) holds no slot and waits for none: anything granted to or
// queued for its predecessor is released.
type ResetSlots struct{}

// Drain tells the rooms supervisor that Lisa is shutting down: no new
// slots are granted, so no new invocation starts; running ones finish.
type Drain struct{}
