package daemon

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lisabot/lisa/trail"
)

// WhyReport is the answer of "why <event_id>": the event's trail entry,
// or, for an event Lisa never saw, hints at the likely cause.
type WhyReport struct {
	EventID string       `json:"event_id"`
	Seen    bool         `json:"seen"`
	Entry   *trail.Entry `json:"entry,omitempty"`
	// Meaning explains the outcome code in a sentence.
	Meaning string   `json:"meaning,omitempty"`
	Hints   []string `json:"hints,omitempty"`
}

// TrailReport is the answer of "trail [room] [n]".
type TrailReport struct {
	Room    string        `json:"room,omitempty"`
	Entries []trail.Entry `json:"entries"`
	// NotAllowed counts events of rooms that are not allowed, which Lisa
	// never reads (matrix.allowed_room_ids).
	NotAllowed      map[string]int `json:"not_allowed_rooms,omitempty"`
	NotAllowedOther int            `json:"not_allowed_other,omitempty"`
}

// maxEventIDBytes bounds an event ID given to "why".
const maxEventIDBytes = 255

// why answers "why <event_id>".
func (d *Daemon) why(args []string) (WhyReport, error) {
	if len(args) != 1 || !strings.HasPrefix(args[0], "$") || len(args[0]) < 2 || len(args[0]) > maxEventIDBytes {
		return WhyReport{}, fmt.Errorf("usage: why <event_id> (an event ID starts with $)")
	}
	r := WhyReport{EventID: args[0]}
	if e, ok := d.trail.Why(args[0]); ok {
		r.Seen, r.Entry, r.Meaning = true, &e, Meaning(e.Outcome)
		return r, nil
	}
	r.Hints = d.neverSeenHints(time.Now())
	return r, nil
}

// neverSeenHints lists the likely reasons Lisa has no record of an event.
func (d *Daemon) neverSeenHints(now time.Time) []string {
	var hints []string
	na, other := d.trail.NotAllowed()
	rooms := "sent events since Lisa started: none"
	if len(na) > 0 || other > 0 {
		ids := slices.Sorted(maps.Keys(na))
		if len(ids) > 5 {
			ids = append(ids[:5], "…")
		}
		rooms = fmt.Sprintf("sent events since Lisa started: %d (%s)", len(na)+min(other, 1), strings.Join(ids, ", "))
	}
	hints = append(hints, "wrong room: Lisa reads only the rooms in matrix.allowed_room_ids; rooms she is in but not allowed to read "+rooms)
	if cur, err := d.store.Cursor(); err != nil || !cur.GetBaselineDone() {
		hints = append(hints, "no sync has completed yet: Lisa has not read anything so far")
	} else {
		age := now.Sub(time.UnixMilli(cur.GetUpdatedAtMs())).Round(time.Second)
		hints = append(hints, "before the baseline: events from before Lisa's first sync are history and are never answered (the events of that first sync are listed as before_baseline)")
		hints = append(hints, fmt.Sprintf("sync behind: the last committed sync was %s ago; an event sent after it is not read yet", age))
	}
	hints = append(hints, fmt.Sprintf("forgotten: the trail keeps the last %d events per room, in memory only; it starts empty when Lisa restarts", d.trail.PerRoom()))
	return hints
}

// trailRows answers "trail [room] [n]".
func (d *Daemon) trailRows(args []string) (TrailReport, error) {
	var r TrailReport
	n := 20
	if len(args) > 0 && strings.HasPrefix(args[0], "!") {
		if !slices.Contains(d.rooms, args[0]) {
			return r, fmt.Errorf("%s is not an allowed room (matrix.allowed_room_ids)", args[0])
		}
		r.Room, args = args[0], args[1:]
	}
	if len(args) > 0 {
		v, err := strconv.Atoi(args[0])
		if err != nil || v < 1 || v > 10_000 || len(args) > 1 {
			return r, fmt.Errorf("usage: trail [allowed room ID] [n], n 1..10000")
		}
		n = v
	}
	r.Entries = d.trail.Recent(r.Room, n)
	if r.Entries == nil {
		r.Entries = []trail.Entry{}
	}
	r.NotAllowed, r.NotAllowedOther = d.trail.NotAllowed()
	return r, nil
}

// Meaning explains an outcome code in one sentence, for the shell and
// the status page (docs/debug-shell.md says what to change).
func Meaning(o trail.Outcome) string {
	if o.IsFailed() {
		return "the invocation failed (" + strings.TrimPrefix(string(o), trail.FailedPrefix) + "); the persona's error message was sent instead of an answer"
	}
	switch o {
	case trail.Invoked:
		return "it invokes Lisa; the invocation is queued or under way"
	case trail.Answered:
		return "Lisa answered it"
	case trail.NotAddressed:
		return "it neither mentions Lisa nor replies to one of her messages"
	case trail.OwnEvent:
		return "it is one of Lisa's own events"
	case trail.Edit:
		return "an edit never invokes Lisa (an edit of a queued question changes the text she answers)"
	case trail.Notice:
		return "a notice (m.notice): bots talk in notices, and Lisa never answers one"
	case trail.NotText:
		return "not a text message (an image, a file, an emote…)"
	case trail.Malformed:
		return "Lisa could not read it (no text, or broken content)"
	case trail.BeforeBaseline:
		return "it came before Lisa's first sync: history is never answered"
	case trail.ReplyTargetInvalid:
		return "it replies to something that is not an event ID, so not to Lisa"
	case trail.ReplyTargetRejected:
		return "the homeserver refused to show the message it replies to, so it is not taken as a reply to Lisa"
	case trail.ReplyLookupAbandoned:
		return "the message it replies to could not be looked up for too long; taken as not a reply to Lisa"
	case trail.RefusedSenderRate:
		return "refused: the sender asked too often (runtime.sender_rate_limit per runtime.sender_rate_window_seconds)"
	case trail.RefusedQueueFull:
		return "refused: the room's queue was full (runtime.room_queue_limit)"
	case trail.Redacted:
		return "it was redacted; a redacted question is not answered, and an answer already sent is redacted too"
	case trail.Redaction:
		return "a redaction event"
	}
	return string(o)
}
