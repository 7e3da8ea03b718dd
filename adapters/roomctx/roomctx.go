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
	// followed for one invocation. Zero or less follows none.
	MaxReplyDepth int
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
}

// New returns a Builder that reads rooms through f. botUserID is Lisa's own
// user ID; her messages are kept and marked as hers. Out-of-range limits
// are clamped as documented on [Limits].
func New(f Fetcher, botUserID string, limits Limits) *Builder {
	limits.MaxEvents = max(limits.MaxEvents, 1)
	limits.MaxCharacters = max(limits.MaxCharacters, 1)
	limits.MaxEventCharacters = min(max(limits.MaxEventCharacters, 1), limits.MaxCharacters)
	limits.MaxReplyDepth = max(limits.MaxReplyDepth, 0)
	return &Builder{fetch: f, bot: id.UserID(botUserID), limits: limits, log: slog.New(slog.DiscardHandler), memo: newMemos(defaultMemoBytes)}
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
// messages before it (from GET /context) and c itself, normalized,
// budgeted and escaped. If the history cannot be fetched the block holds
// the invocation alone. Build fails only if c lacks a room, event or
// sender, or if ctx ends.
func (b *Builder) Build(ctx context.Context, c *roompb.Candidate) (string, error) {
	if c == nil || c.GetRoomId() == "" || c.GetEventId() == "" || c.GetSender() == "" {
		return "", errors.New("roomctx: candidate lacks room, event or sender")
	}
	room := id.RoomID(c.GetRoomId())
	inv := invocationTurn(c, b.bot, b.limits.MaxEventCharacters, b.memo)

	var history []*turn
	var window map[id.EventID]*turn
	var skipped map[id.EventID]bool
	var state []*event.Event
	// The member list does not depend on the context: fetch both at once,
	// so the invocation waits for one round trip, not two.
	membersCtx, stopMembers := context.WithCancel(ctx)
	defer stopMembers()
	members := make(chan *mautrix.RespJoinedMembers, 1)
	go func() { members <- b.joinedMembers(membersCtx, room) }()
	resp, err := b.fetch.Context(ctx, room, inv.id, contextFilter(), contextLimit(b.limits.MaxEvents))
	switch {
	case ctx.Err() != nil:
		return "", ctx.Err()
	case err != nil || resp == nil:
		// Last resort: the events that came with the invocation in the
		// same /sync response (same room, before it, bounded).
		before := batchEvents(c.GetBatchEvents())
		b.log.WarnContext(ctx, "room context unavailable, using the events of the sync batch",
			"room", messages.RoomID(room), "event", messages.EventID(inv.id), "status", errorStatus(err), "batch_events", len(before))
		history, window, skipped = parseWindow(before, room, inv.id, b.bot, b.limits.MaxEventCharacters, b.memo)
	default:
		before := make([]*event.Event, 0, len(resp.EventsBefore))
		for i := len(resp.EventsBefore) - 1; i >= 0; i-- { // newest first on the wire
			before = append(before, resp.EventsBefore[i])
		}
		history, window, skipped = parseWindow(before, room, inv.id, b.bot, b.limits.MaxEventCharacters, b.memo)
		state = resp.State
	}

	selected := b.selectTurns(inv, history)
	names := namesOf(room, <-members, state)
	r := &resolver{
		b:         b,
		room:      room,
		selected:  make(map[id.EventID]*turn, len(selected)),
		window:    window,
		skipped:   skipped,
		seen:      map[id.EventID]seenState{},
		remaining: b.limits.MaxCharacters,
	}
	for i, t := range selected {
		t.seq = i + 1
		r.selected[t.id] = t
		r.remaining -= t.chars
	}
	// The invocation's reply chain comes first, then the history, newest
	// first, so limited depth and budget serve the most relevant replies.
	inv.reply = r.ref(ctx, inv.replyTo)
	for i := len(selected) - 1; i >= 0; i-- {
		if t := selected[i]; t != inv {
			t.reply = r.ref(ctx, t.replyTo)
		}
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return render(room, selected, names.lookup), nil
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

// selectTurns applies the budget order of design §11.4: the invocation
// first, then history newest to oldest while both the event and the
// character budget allow, returned oldest first.
func (b *Builder) selectTurns(inv *turn, history []*turn) []*turn {
	picked := []*turn{inv}
	used := inv.chars
	for i := len(history) - 1; i >= 0; i-- {
		t := history[i]
		if len(picked)+1 > b.limits.MaxEvents || used+t.chars > b.limits.MaxCharacters {
			break
		}
		picked = append(picked, t)
		used += t.chars
	}
	for i, j := 0, len(picked)-1; i < j; i, j = i+1, j-1 {
		picked[i], picked[j] = picked[j], picked[i]
	}
	return picked
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
