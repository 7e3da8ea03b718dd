package roomctx

import (
	"context"
	"slices"
	"unicode/utf8"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
)

// ThreadFetcher is an optional capability of a [Fetcher]: the events of a
// thread (GET /_matrix/client/v1/rooms/{roomId}/relations/{root}/m.thread).
// *mautrix.Client has it. Without it, a thread's context is taken from
// the room timeline around the invocation.
type ThreadFetcher interface {
	// GetRelations returns one page of the events relating to eventID.
	GetRelations(ctx context.Context, roomID id.RoomID, eventID id.EventID, req *mautrix.ReqGetRelations) (*mautrix.RespGetRelations, error)
}

// HistoryFetcher is an optional capability of a [Fetcher]: paging the
// timeline backwards (GET /messages). *mautrix.Client has it. Without it,
// the history is what one GET /context returns (at most 50 events on
// Dendrite and Synapse).
type HistoryFetcher interface {
	// Messages returns one page of room events from the token from.
	Messages(ctx context.Context, roomID id.RoomID, from, to string, dir mautrix.Direction, filter *mautrix.FilterPart, limit int) (*mautrix.RespMessages, error)
}

const (
	// maxRelationsLimit is the largest page GET /relations returns on
	// Dendrite (it caps larger limits at 50).
	maxRelationsLimit = 50
	// maxMessagesLimit bounds one page of GET /messages.
	maxMessagesLimit = 100
	// maxExtraPages bounds the pages read beyond the first, whatever
	// MaxEvents is.
	maxExtraPages = 10
)

// need tracks how much history is still wanted: usable messages and their
// characters, against the limits.
type need struct {
	events, chars int // still wanted
}

// newNeed wants MaxEvents-1 messages (the invocation is one) and
// MaxCharacters characters, and WindowStepEvents-1 messages more (and
// their share of characters): the previous block's start, where the next
// block begins, may lie that far back.
func newNeed(l Limits) need {
	extra := max(l.WindowStepEvents, 1) - 1
	return need{events: l.MaxEvents - 1 + extra, chars: l.MaxCharacters + l.MaxCharacters*extra/max(l.MaxEvents, 1)}
}

// met reports whether nothing more is wanted.
func (n need) met() bool { return n.events <= 0 || n.chars <= 0 }

// count takes evt off what is wanted if it would become a message of the
// block: a text message that is no edit. The characters are those of its
// plain body, an estimate good enough to stop paging.
func (n *need) count(evt *event.Event, memo *memos) {
	if evt == nil || evt.Type.Type != event.EventMessage.Type {
		return
	}
	if isRedacted(evt) {
		n.events--
		return
	}
	msg, ok := messageContent(evt, memo)
	if !ok || msg.RelatesTo.GetReplaceID() != "" || !isTextType(msg.MsgType) {
		return
	}
	n.events--
	n.chars -= utf8.RuneCountInString(msg.Body)
}

// extraPages is how many pages beyond the first may be read for
// maxEvents: enough for the limit at pageSize, plus one, bounded.
func extraPages(maxEvents, pageSize int) int {
	return min(maxEvents/pageSize+1, maxExtraPages)
}

// threadOf returns the thread root evt belongs to (rel_type m.thread), or
// "".
func threadOf(evt *event.Event, memo *memos) id.EventID {
	if evt == nil || evt.Type.Type != event.EventMessage.Type || isRedacted(evt) {
		return ""
	}
	msg, ok := messageContent(evt, memo)
	if !ok {
		return ""
	}
	return msg.RelatesTo.GetThreadParent()
}

// keepThread splits events (oldest first) by thread: it keeps those for
// which keep(thread root, event ID) holds and returns the IDs of the
// others, which are no valid reply targets either.
func keepThread(events []*event.Event, memo *memos, keep func(root, evt id.EventID) bool) ([]*event.Event, []id.EventID) {
	out := events[:0:0]
	var dropped []id.EventID
	for _, evt := range events {
		if evt == nil {
			continue
		}
		if keep(threadOf(evt, memo), evt.ID) {
			out = append(out, evt)
		} else {
			dropped = append(dropped, evt.ID)
		}
	}
	return out, dropped
}

// mainTimeline keeps the events of the main timeline: thread events are
// not part of a main-timeline conversation.
func mainTimeline(events []*event.Event, memo *memos) ([]*event.Event, []id.EventID) {
	return keepThread(events, memo, func(root, _ id.EventID) bool { return root == "" })
}

// inThread keeps the root of thread and the events in it.
func inThread(events []*event.Event, thread id.EventID, memo *memos) ([]*event.Event, []id.EventID) {
	return keepThread(events, memo, func(root, evt id.EventID) bool { return root == thread || evt == thread })
}

// pageBack extends before (oldest first, as returned by GET /context
// whose start token is from) with older events from GET /messages, until
// the limits are met, the room's start is reached, a page fails or the
// page bound is used up. The events of threads do not count towards the
// main timeline's limits. Events already seen are skipped: Dendrite's
// start token points at the newest event before the anchor, so its first
// page repeats /context's events (one more page is allowed for that).
// A page that holds the invocation itself contributes only what is older
// than it.
func (b *Builder) pageBack(ctx context.Context, room id.RoomID, invocation id.EventID, from string, before []*event.Event) []*event.Event {
	hf, ok := b.fetch.(HistoryFetcher)
	if !ok || from == "" {
		return before
	}
	n := newNeed(b.limits)
	seen := make(map[id.EventID]bool, len(before))
	for _, evt := range before {
		if evt != nil {
			seen[evt.ID] = true
			b.countMain(&n, evt)
		}
	}
	for range extraPages(b.limits.MaxEvents, maxMessagesLimit) + 1 {
		if n.met() || ctx.Err() != nil {
			break
		}
		resp, err := hf.Messages(ctx, room, from, "", mautrix.DirectionBackward, contextFilter(), min(max(2*n.events, 10), maxMessagesLimit))
		if err != nil || resp == nil {
			b.log.WarnContext(ctx, "older room history unavailable", "room", messages.RoomID(room), "status", errorStatus(err), "events", len(before))
			break
		}
		chunk := resp.Chunk // newest first
		if i := slices.IndexFunc(chunk, func(e *event.Event) bool { return e != nil && e.ID == invocation }); i >= 0 {
			chunk = chunk[i+1:]
		}
		older := make([]*event.Event, 0, len(chunk)+len(before))
		for i := len(chunk) - 1; i >= 0; i-- {
			if evt := chunk[i]; evt != nil && !seen[evt.ID] {
				seen[evt.ID] = true
				older = append(older, evt)
				b.countMain(&n, evt)
			}
		}
		before = append(older, before...)
		if len(resp.Chunk) == 0 || resp.End == "" || resp.End == from {
			break
		}
		from = resp.End
	}
	return before
}

// countMain counts evt against n if it is on the main timeline.
func (b *Builder) countMain(n *need, evt *event.Event) {
	if threadOf(evt, b.memo) == "" {
		n.count(evt, b.memo)
	}
}
