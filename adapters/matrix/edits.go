package matrix

import (
	"context"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// classify sorts one timeline event: a redaction, an edit, or a message
// (Classifier.Classify). routed holds the candidates of the answer being
// read, which the ledger does not know yet.
func (s *Source) classify(ctx context.Context, room id.RoomID, evt *event.Event, routed map[string]bool) (*roompb.Candidate, Verdict) {
	switch {
	case evt != nil && evt.Type == event.EventRedaction:
		return s.classifyRedaction(room, evt, routed)
	case IsEdit(evt):
		return s.classifyEdit(room, evt, routed)
	}
	return s.classifier.Classify(ctx, room, evt, s.isLisa)
}

// classifyRedaction hands a redaction to its room only when the message
// it removes was routed there (it invoked Lisa, or is an edit or redaction
// the room took in): the room may owe a redaction of its reply, which it
// looks up on the homeserver when the question is older than its memory.
// Any other redaction is RejectRedactionOther. As for edits, the ledger
// decides, and a ledger that fails for now fails the answer.
func (s *Source) classifyRedaction(room id.RoomID, evt *event.Event, routed map[string]bool) (*roompb.Candidate, Verdict) {
	cand, verdict := s.classifier.Redaction(room, evt)
	if cand == nil {
		return nil, verdict
	}
	if !routed[cand.GetRedactsEventId()] {
		ok, err := s.ledger.Routed(string(room), cand.GetRedactsEventId())
		switch {
		case err != nil:
			return nil, RejectReplyLookup
		case !ok:
			return nil, RejectRedactionOther
		}
	}
	return cand, verdict
}

// classifyEdit decides what an edit (m.replace) means to Lisa. An edit is
// never an invocation, even one that adds a mention or an alias:
//   - an edit of a message that was routed to its room (it invoked her)
//     goes to the room as TriggerEdit: the room answers the new text if
//     it has not started on the old one, and ignores it otherwise;
//   - an edit of any other message is RejectEdit, whatever its new text
//     says. Nothing is looked up on the homeserver: the ledger alone
//     decides.
//
// A ledger that fails for now fails the answer like a reply lookup does
// (RejectReplyLookup), within the same bound.
func (s *Source) classifyEdit(room id.RoomID, evt *event.Event, routed map[string]bool) (*roompb.Candidate, Verdict) {
	orig, nc, verdict := s.classifier.Edit(room, evt)
	if nc == nil {
		return nil, verdict
	}
	wasRouted := routed[string(orig)]
	if !wasRouted {
		ok, err := s.ledger.Routed(string(room), string(orig))
		if err != nil {
			return nil, RejectReplyLookup
		}
		wasRouted = ok
	}
	if !wasRouted {
		s.log.Debug("edit ignored: an edit is never an invocation",
			"room", messages.RoomID(room), "event", messages.EventID(evt.ID),
			"original", messages.EventID(orig), "outcome", string(RejectEdit))
		return nil, RejectEdit
	}
	body, formatted := messageText(nc)
	return &roompb.Candidate{
		RoomId: string(room), EventId: string(evt.ID), Sender: string(evt.Sender),
		OriginTsMs: evt.Timestamp, Body: body, FormattedBody: formatted, ReplacesEventId: string(orig),
		Trigger: string(TriggerEdit), OriginalRouted: true,
	}, TriggerEdit
}
