package roomctx

import (
	"context"

	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
)

// excerptChars bounds the text of one reply excerpt.
const excerptChars = 200

// Reply reference states shown in the block.
const (
	statusUnavailable   = "unavailable"    // missing, malformed, redacted, cross-room or no text
	statusNotFollowed   = "not_followed"   // reply depth or character budget used up
	statusAlreadyQuoted = "already_quoted" // its excerpt appears elsewhere in the block
)

// replyRef is what a message says about the message it replies to.
// Exactly one of inBlock, status and target is set.
type replyRef struct {
	inBlock bool       // target named by eventID (a message of the block, or a history message's target)
	eventID id.EventID // target event; empty if malformed
	status  string     // target not shown, see the status constants
	target  *turn      // excerpt of a target outside the block
}

// seenState records how a followed target turned out, so a second
// reference neither fetches nor quotes it again.
type seenState int

const (
	seenQuoted seenState = iota + 1
	seenUnavailable
)

// resolver resolves the reply references of one Build.
type resolver struct {
	b         *Builder
	room      id.RoomID
	selected  map[id.EventID]*turn // turns in the block, by ID
	window    map[id.EventID]*turn // all text turns fetched, by ID
	skipped   map[id.EventID]bool  // other events fetched
	seen      map[id.EventID]seenState
	follows   int // targets followed so far
	remaining int // character budget left for excerpts
}

// ref resolves a reply to target. Targets in the block are referred to by
// event ID. Others are followed, at most MaxReplyDepth per Build
// and only while characters remain, and quoted as a short excerpt whose
// own reply is resolved in turn; the seen set ends cycles.
func (r *resolver) ref(ctx context.Context, target id.EventID) *replyRef {
	switch {
	case target == "":
		return nil
	case !validEventID(target):
		return &replyRef{status: statusUnavailable}
	case r.selected[target] != nil:
		return &replyRef{inBlock: true, eventID: target}
	case r.seen[target] == seenQuoted:
		return &replyRef{eventID: target, status: statusAlreadyQuoted}
	case r.seen[target] == seenUnavailable:
		return &replyRef{eventID: target, status: statusUnavailable}
	case r.follows >= r.b.limits.MaxReplyDepth || r.remaining <= 0:
		return &replyRef{eventID: target, status: statusNotFollowed}
	}
	r.follows++
	r.seen[target] = seenUnavailable
	t := r.lookup(ctx, target)
	if t == nil {
		return &replyRef{eventID: target, status: statusUnavailable}
	}
	r.seen[target] = seenQuoted
	ex := *t
	ex.invocation, ex.reply = false, nil
	ex.text, ex.chars, ex.truncated = capText(t.full, min(excerptChars, r.b.limits.MaxEventCharacters, r.remaining))
	r.remaining -= ex.chars
	ex.reply = r.ref(ctx, t.replyTo)
	return &replyRef{eventID: target, target: &ex}
}

// inBlock resolves a history message's reply to target without following
// it: by ID, whether or not the target is in the block. The result depends
// on target alone, so the message renders the same way in every block.
func (r *resolver) inBlock(target id.EventID) *replyRef {
	switch {
	case target == "":
		return nil
	case !validEventID(target):
		return &replyRef{status: statusUnavailable}
	}
	return &replyRef{inBlock: true, eventID: target}
}

// lookup finds a reply target outside the block: in the fetched window,
// else on the homeserver. It returns nil if the target is unusable.
func (r *resolver) lookup(ctx context.Context, target id.EventID) *turn {
	if t := r.window[target]; t != nil {
		if t.redacted {
			return nil
		}
		return t
	}
	if r.skipped[target] {
		return nil
	}
	evt, err := r.b.fetch.GetEvent(ctx, r.room, target)
	if err != nil {
		r.b.log.DebugContext(ctx, "reply target unavailable",
			"room", messages.RoomID(r.room), "event", messages.EventID(target), "status", errorStatus(err))
		return nil
	}
	return targetTurn(evt, target, r.room, r.b.bot, r.b.limits.MaxEventCharacters, r.b.memo)
}
