package roomctx

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// maxContextLimit is the largest limit GET /context accepts on Dendrite
// (and a sensible bound for any homeserver).
const maxContextLimit = 100

// Limits bounds the context of one invocation. They mirror the [context]
// section of the configuration.
type Limits struct {
	// MaxEvents is the most timeline messages in the block, the
	// invocation included. Values below 1 count as 1.
	MaxEvents int
	// MaxCharacters is the most message characters in the block: message
	// texts plus reply excerpts, not markup, names or truncation markers.
	// The invocation is kept even if it alone exceeds it. Values below 1
	// count as 1.
	MaxCharacters int
	// MaxEventCharacters is the most characters kept from any single
	// message; longer texts are cut at a rune boundary and marked. It is
	// lowered to MaxCharacters if larger. Values below 1 count as 1.
	MaxEventCharacters int
	// MaxReplyDepth is the most reply targets outside the block that are
	// followed for the invoking message's reply chain. Zero or less
	// follows none.
	MaxReplyDepth int
	// WindowStepEvents is how far the block's start moves at once (see
	// [Builder.BuildExcerpt]). Values below 1 count as 1: the block
	// always starts as far back as the limits allow.
	WindowStepEvents int
}

// Fetcher is the part of the Matrix client API the builder reads. The
// method set matches *mautrix.Client, which satisfies it.
type Fetcher interface {
	// Context returns events around eventID in roomID (GET /context).
	Context(ctx context.Context, roomID id.RoomID, eventID id.EventID, filter *mautrix.FilterPart, limit int) (*mautrix.RespContext, error)
	// GetEvent returns one event of roomID (GET /rooms/{roomId}/event).
	GetEvent(ctx context.Context, roomID id.RoomID, eventID id.EventID) (*event.Event, error)
	// JoinedMembers returns the joined members of roomID with their
	// display names.
	JoinedMembers(ctx context.Context, roomID id.RoomID) (*mautrix.RespJoinedMembers, error)
}

// Builder builds conversation context blocks. It holds no per-call state
// and is safe for concurrent use.
type Builder struct {
	fetch  Fetcher
	bot    id.UserID
	limits Limits
	log    *slog.Logger
	memo   *memos // shared by copies from WithLogger
	starts *starts
}

// New returns a Builder that reads rooms through f. botUserID is Lisa's own
// user ID; her messages are kept and marked as hers. Out-of-range limits
// are clamped as documented on [Limits].
func New(f Fetcher, botUserID string, limits Limits) *Builder {
	limits.MaxEvents = max(limits.MaxEvents, 1)
	limits.MaxCharacters = max(limits.MaxCharacters, 1)
	limits.MaxEventCharacters = min(max(limits.MaxEventCharacters, 1), limits.MaxCharacters)
	limits.MaxReplyDepth = max(limits.MaxReplyDepth, 0)
	limits.WindowStepEvents = min(max(limits.WindowStepEvents, 1), limits.MaxEvents)
	return &Builder{fetch: f, bot: id.UserID(botUserID), limits: limits, log: slog.New(slog.DiscardHandler), memo: newMemos(defaultMemoBytes),
		starts: newStarts(maxRememberedStarts)}
}

// WithLogger returns a copy of b that reports degraded fetches (for
// example a failed GET /context) to log. Records name rooms and events by
// hash only and never contain message text. A nil log discards records.
func (b *Builder) WithLogger(log *slog.Logger) *Builder {
	c := *b
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c.log = log
	return &c
}

// Limits returns the limits in effect after clamping.
func (b *Builder) Limits() Limits { return b.limits }

// Build returns the <room_context> block for the invocation c: the
// messages before it, normalized, budgeted and escaped (see
// [Builder.BuildWithFacts]).
func (b *Builder) Build(ctx context.Context, c *roompb.Candidate) (string, error) {
	block, _, err := b.BuildWithFacts(ctx, c)
	return block, err
}

// BuildWithFacts returns the <room_context> block for the invocation c
// and facts about its room. For an invocation in a thread
// (c.ThreadRootEventId) the block is that thread: its root and the
// thread's events before c (GET /relations, paged), else the room
// timeline's messages before c (GET /context, then GET /messages pages
// for more than one /context gives) without the events of threads. If
// the history cannot be fetched the block holds the invocation and the
// events of its /sync batch. The facts are the room's name and topic and
// Lisa's display name; what cannot be fetched is left empty. It fails
// only if c lacks a room, event or sender, or if ctx ends.
func (b *Builder) BuildWithFacts(ctx context.Context, c *roompb.Candidate) (string, messages.RoomFacts, error) {
	ex, facts, err := b.BuildExcerpt(ctx, c)
	if err != nil {
		return "", messages.RoomFacts{}, err
	}
	return ex.Block(), facts, nil
}

// BuildExcerpt is [Builder.BuildWithFacts] with the block in parts: its
// opening, one part per message (the invoking message last) and its
// closing. Each message renders the same in every block it appears in
// while the block's start stays put, except the invoking one, which is
// marked: messages refer to targets in the block by sequence number and
// to others by ID only (only the invoking message's reply chain is
// followed and quoted). The start stays where the previous block of the
// same room (or thread) began until the limits force it on, and then
// moves Limits.WindowStepEvents messages at once, so that successive
// blocks share their beginning; the start is remembered in memory, per
// room and thread.
func (b *Builder) BuildExcerpt(ctx context.Context, c *roompb.Candidate) (messages.Excerpt, messages.RoomFacts, error) {
	if c == nil || c.GetRoomId() == "" || c.GetEventId() == "" || c.GetSender() == "" {
		return messages.Excerpt{}, messages.RoomFacts{}, errors.New("roomctx: candidate lacks room, event or sender")
	}
	room := id.RoomID(c.GetRoomId())
	inv := invocationTurn(c, b.bot, b.limits.MaxEventCharacters, b.memo)

	// The member list and the room state do not depend on the history:
	// fetch them meanwhile, so the invocation waits for one round trip.
	sideCtx, stopSide := context.WithCancel(ctx)
	defer stopSide()
	members := make(chan *mautrix.RespJoinedMembers, 1)
	go func() { members <- b.joinedMembers(sideCtx, room) }()
	roomState := make(chan [2]string, 1)
	go func() {
		name, topic := b.roomState(sideCtx, room)
		roomState <- [2]string{name, topic}
	}()

	before, state, dropped := b.history(ctx, c, room, inv)
	if err := ctx.Err(); err != nil {
		return messages.Excerpt{}, messages.RoomFacts{}, err
	}
	history, window, skipped := parseWindow(before, room, inv.id, b.bot, b.limits.MaxEventCharacters, b.memo)
	for _, e := range dropped {
		skipped[e] = true
	}

	selected := b.selectTurns(startKey(room, c.GetThreadRootEventId()), inv, history)
	joined := <-members
	names := namesOf(room, joined, state)
	r := &resolver{
		b:         b,
		room:      room,
		selected:  make(map[id.EventID]*turn, len(selected)),
		window:    window,
		skipped:   skipped,
		seen:      map[id.EventID]seenState{},
		remaining: b.limits.MaxCharacters,
	}
	for _, t := range selected {
		r.selected[t.id] = t
		r.remaining -= t.chars
	}
	// Only the invocation's reply chain is followed; the history refers to
	// its targets, so that each message renders the same way whatever
	// else the block holds.
	inv.reply = r.ref(ctx, inv.replyTo)
	for _, t := range selected {
		if t != inv {
			t.reply = r.inBlock(t.replyTo)
		}
	}
	rs := <-roomState
	if err := ctx.Err(); err != nil {
		return messages.Excerpt{}, messages.RoomFacts{}, err
	}
	return renderExcerpt(room, selected, names.lookup), b.facts(rs[0], rs[1], joined), nil
}

// history returns the events before the invocation, oldest first: its
// thread for an invocation in a thread, else the main timeline. dropped
// are events seen but left out (those of other threads, or of the main
// timeline for a thread), which are no valid reply targets. state is the
// member state GET /context returned, if it was used.
func (b *Builder) history(ctx context.Context, c *roompb.Candidate, room id.RoomID, inv *turn) (before, state []*event.Event, dropped []id.EventID) {
	thread := id.EventID(c.GetThreadRootEventId())
	if thread != "" && !validEventID(thread) {
		thread = ""
	}
	if thread != "" {
		if evs, ok := b.threadHistory(ctx, room, thread, inv); ok {
			return evs, nil, nil
		}
	}
	before, state = b.timeline(ctx, c, room, inv)
	if thread != "" {
		before, dropped = inThread(before, thread, b.memo)
	} else {
		before, dropped = mainTimeline(before, b.memo)
	}
	return before, state, dropped
}

// timeline returns the room timeline before the invocation, oldest
// first, from GET /context and, when MaxEvents asks for more than it
// gave, GET /messages. If GET /context fails, the events that came with
// the invocation in the same /sync response (same room, before it,
// bounded) stand in.
func (b *Builder) timeline(ctx context.Context, c *roompb.Candidate, room id.RoomID, inv *turn) (before, state []*event.Event) {
	limit := contextLimit(b.limits.MaxEvents + b.limits.WindowStepEvents - 1)
	resp, err := b.fetch.Context(ctx, room, inv.id, contextFilter(), limit)
	if ctx.Err() != nil {
		return nil, nil
	}
	if err != nil || resp == nil {
		before = batchEvents(c.GetBatchEvents())
		b.log.WarnContext(ctx, "room context unavailable, using the events of the sync batch",
			"room", messages.RoomID(room), "event", messages.EventID(inv.id), "status", errorStatus(err), "batch_events", len(before))
		return before, nil
	}
	before = make([]*event.Event, 0, len(resp.EventsBefore))
	for i := len(resp.EventsBefore) - 1; i >= 0; i-- { // newest first on the wire
		before = append(before, resp.EventsBefore[i])
	}
	// Homeservers give half the limit before the anchor; fewer means the
	// room's start was reached.
	if len(resp.EventsBefore) >= limit/2 {
		before = b.pageBack(ctx, room, inv.id, resp.Start, before)
	}
	return before, resp.State
}

// batchEvents decodes the raw events kept with a candidate; undecodable
// ones are dropped.
func batchEvents(raws [][]byte) []*event.Event {
	out := make([]*event.Event, 0, len(raws))
	for _, raw := range raws {
		var evt event.Event
		if json.Unmarshal(raw, &evt) == nil {
			out = append(out, &evt)
		}
	}
	return out
}

// contextFilter asks for room messages only, with the members of their
// senders in the returned state.
func contextFilter() *mautrix.FilterPart {
	return &mautrix.FilterPart{
		Types:                   []event.Type{event.EventMessage},
		LazyLoadMembers:         true,
		IncludeRedundantMembers: true,
	}
}

// contextLimit is the limit requested from GET /context. Homeservers split
// it between the events before and after the anchor, and edits share the
// window, hence twice the events wanted.
func contextLimit(maxEvents int) int {
	return min(2*maxEvents, maxContextLimit)
}

// selectTurns applies the budget order of design §11.4 — the invocation
// always, then as much history as the event and character budgets allow
// — returned oldest first, with the block's start moving in steps: the
// previous block's first message (of key) stays the first while the
// budgets allow, and when they no longer do, the start moves on by
// Limits.WindowStepEvents messages until they do. Without a remembered
// start (the first block of a room, or after a restart), the block starts
// as far back as the budgets allow.
func (b *Builder) selectTurns(key string, inv *turn, history []*turn) []*turn {
	fits := func(from int) bool {
		if len(history)-from+1 > b.limits.MaxEvents {
			return false
		}
		used := inv.chars
		for _, t := range history[from:] {
			used += t.chars
		}
		return used <= b.limits.MaxCharacters
	}
	start := -1
	if first, ok := b.starts.get(key); ok {
		for i, t := range history {
			if t.id == first {
				start = i
				break
			}
		}
	}
	if start < 0 {
		// The fullest block: newest history first, while both fit.
		start = len(history)
		used := inv.chars
		for i := len(history) - 1; i >= 0; i-- {
			if len(history)-i+1 > b.limits.MaxEvents || used+history[i].chars > b.limits.MaxCharacters {
				break
			}
			used += history[i].chars
			start = i
		}
	}
	for start < len(history) && !fits(start) {
		start = min(start+b.limits.WindowStepEvents, len(history))
	}
	if start < len(history) {
		b.starts.put(key, history[start].id)
	} else {
		b.starts.put(key, inv.id)
	}
	picked := make([]*turn, 0, len(history)-start+1)
	picked = append(picked, history[start:]...)
	return append(picked, inv)
}

// errorStatus describes err for logs without its text, which may hold
// room and event IDs.
func errorStatus(err error) string {
	var he mautrix.HTTPError
	switch {
	case err == nil:
		return "empty"
	case errors.As(err, &he) && he.Response != nil:
		return strconv.Itoa(he.Response.StatusCode)
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	default:
		return "transport"
	}
}
