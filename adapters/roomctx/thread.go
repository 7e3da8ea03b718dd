package roomctx

import (
	"context"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
)

// threadHistory returns the thread of an invocation in a thread, oldest
// first: its root, then the thread's events before the invocation, read
// newest first from GET /relations/{root}/m.thread in pages until the
// limits are met or the page bound is used up. Events after the
// invocation are never returned: those listed before it (the newest),
// or, if it is not listed at all, those not older than it. ok is false if
// the fetcher cannot read threads or the first page fails; the caller
// then falls back to the room timeline.
func (b *Builder) threadHistory(ctx context.Context, room id.RoomID, root id.EventID, inv *turn) (events []*event.Event, ok bool) {
	tf, can := b.fetch.(ThreadFetcher)
	if !can {
		return nil, false
	}
	n := newNeed(b.limits)
	req := &mautrix.ReqGetRelations{RelationType: event.RelThread, Dir: mautrix.DirectionBackward,
		Limit: min(2*b.limits.MaxEvents, maxRelationsLimit)}
	var newer, older []*event.Event // newest first
	seen := false
	// Pages may overlap: Continuwuity and conduwuit give, for dir=b, the
	// page's newest event as next_batch (paginate_relations_with_filter,
	// src/api/client/relations.rs; docs/homeservers.md), so the next page
	// repeats all but one event of this one — the invocation and what
	// came after it included. Each event counts once, in the place its
	// first listing gave it; a page that brings nothing new ends the walk.
	listed := map[id.EventID]bool{}
	for page := 0; page <= extraPages(b.limits.MaxEvents, maxRelationsLimit); page++ {
		resp, err := tf.GetRelations(ctx, room, root, req)
		if err != nil || resp == nil {
			if page == 0 {
				b.log.WarnContext(ctx, "thread unavailable, using the room timeline",
					"room", messages.RoomID(room), "event", messages.EventID(inv.id), "status", errorStatus(err))
				return nil, false
			}
			b.log.WarnContext(ctx, "older thread events unavailable",
				"room", messages.RoomID(room), "event", messages.EventID(inv.id), "status", errorStatus(err), "events", len(older))
			break
		}
		fresh := 0
		for _, evt := range resp.Chunk {
			if evt == nil || listed[evt.ID] {
				continue
			}
			listed[evt.ID] = true
			fresh++
			switch {
			case !seen && evt.ID == inv.id:
				seen = true
			case !seen:
				newer = append(newer, evt)
			default:
				older = append(older, evt)
				n.count(evt, b.memo)
			}
		}
		if (seen && n.met()) || fresh == 0 || resp.NextBatch == "" || resp.NextBatch == req.From || ctx.Err() != nil {
			break
		}
		req.From = resp.NextBatch
	}
	if !seen {
		// Not listed (yet): what is not newer than the invocation counts.
		older = notAfter(newer, inv.ts)
	}
	out := make([]*event.Event, 0, len(older)+1)
	if r := b.threadRoot(ctx, room, root); r != nil {
		out = append(out, r)
	}
	for i := len(older) - 1; i >= 0; i-- {
		out = append(out, older[i])
	}
	return out, true
}

// notAfter keeps the events sent before ts (ms). Without a time for the
// invocation, nothing can be shown to precede it.
func notAfter(events []*event.Event, ts int64) []*event.Event {
	var out []*event.Event
	for _, evt := range events {
		if ts > 0 && evt.Timestamp > 0 && evt.Timestamp < ts {
			out = append(out, evt)
		}
	}
	return out
}

// threadRoot fetches the root of a thread. A root that cannot be fetched
// only costs the block its first message.
func (b *Builder) threadRoot(ctx context.Context, room id.RoomID, root id.EventID) *event.Event {
	evt, err := b.fetch.GetEvent(ctx, room, root)
	if err != nil || evt == nil || evt.ID != root {
		b.log.DebugContext(ctx, "thread root unavailable", "room", messages.RoomID(room), "event", messages.EventID(root), "status", errorStatus(err))
		return nil
	}
	return evt
}
