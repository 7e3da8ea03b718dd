package matrix

import (
	"context"
	"errors"

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
		return s.classifier.Redaction(room, evt)
	case IsEdit(evt):
		return s.classifyEdit(ctx, room, evt, routed)
	}
	return s.classifier.Classify(ctx, room, evt, s.isLisa)
}

// classifyEdit decides what an edit (m.replace) means to Lisa:
//   - an edit of a message that was routed to its room (it invoked her)
//     goes to the room as TriggerEdit: the room answers the new text if
//     it has not started on the old one, and ignores it otherwise;
//   - an edit whose new text addresses her, of a message by the same
//     member that did not, invokes her once, keyed to the original
//     message (the room rewrites the candidate; see
//     roompb.Candidate.replaces_event_id);
//   - anything else is no invocation.
//
// Only the second case looks the original up (GET /event), and only for
// edits that address Lisa, so ordinary edits cost nothing. A lookup that
// fails for now fails the answer like a reply lookup does
// (RejectReplyLookup), within the same bound.
func (s *Source) classifyEdit(ctx context.Context, room id.RoomID, evt *event.Event, routed map[string]bool) (*roompb.Candidate, Verdict) {
	orig, nc, verdict := s.classifier.Edit(room, evt)
	if nc == nil {
		return nil, verdict
	}
	body, formatted := messageText(nc)
	cand := &roompb.Candidate{
		RoomId: string(room), EventId: string(evt.ID), Sender: string(evt.Sender),
		OriginTsMs: evt.Timestamp, Body: body, FormattedBody: formatted, ReplacesEventId: string(orig),
	}
	wasRouted := routed[string(orig)]
	if !wasRouted {
		ok, err := s.ledger.Routed(string(room), string(orig))
		if err != nil {
			return nil, RejectReplyLookup
		}
		wasRouted = ok
	}
	if wasRouted {
		cand.Trigger, cand.OriginalRouted = string(TriggerEdit), true
		return cand, TriggerEdit
	}
	trigger := s.classifier.addressed(nc, body)
	if !trigger.Accepted() {
		return nil, trigger
	}
	original, verdict := s.original(ctx, room, orig, evt.Sender)
	if original == nil {
		return nil, verdict
	}
	if s.classifier.addressed(original, body0(original)).Accepted() {
		return nil, RejectEditOfAddressed
	}
	cand.Trigger = string(trigger)
	cand.ThreadRootEventId = threadRoot(original)
	cand.ReplyToEventId = string(original.RelatesTo.GetNonFallbackReplyTo())
	return cand, trigger
}

// body0 is a message's body without its reply fallback.
func body0(msg *event.MessageEventContent) string {
	body, _ := messageText(msg)
	return body
}

// original fetches the message an edit replaces and checks that the edit
// may replace it: the same sender, a text message, not itself an edit.
func (s *Source) original(ctx context.Context, room id.RoomID, orig id.EventID, sender id.UserID) (*event.MessageEventContent, Verdict) {
	var evt *event.Event
	err := s.read(ctx, func() (err error) {
		evt, err = s.c.cli.GetEvent(ctx, room, orig)
		return lookupError(err)
	})
	switch {
	case errors.Is(err, errNotLisas), errors.Is(err, ErrReplyTargetRejected):
		s.log.Info("the original of an edit is not visible; the edit is no invocation",
			"room", messages.RoomID(room), "original", messages.EventID(orig))
		return nil, RejectEditUnverifiable
	case err != nil:
		return nil, RejectReplyLookup
	case evt == nil || evt.Sender != sender || evt.Type != event.EventMessage:
		return nil, RejectEditUnverifiable
	}
	msg, _ := parseMessage(evt)
	if msg == nil || msg.MsgType != event.MsgText || msg.RelatesTo.GetReplaceID() != "" {
		return nil, RejectEditUnverifiable
	}
	return msg, ""
}
