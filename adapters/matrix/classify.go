package matrix

import (
	"context"
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages/roompb"
)

// Verdict is why an event was accepted or rejected.
type Verdict string

// Verdicts. Accepted events carry a trigger; every other verdict is a
// rejection reason, counted in logs, never shown with the event's body.
const (
	TriggerMention   Verdict = "mention" // structured m.mentions
	TriggerAlias     Verdict = "alias"   // an alias as a whole word in the body
	TriggerReply     Verdict = "reply"   // a reply to one of Lisa's events
	RejectMalformed  Verdict = "malformed"
	RejectRoom       Verdict = "room_not_allowed"
	RejectType       Verdict = "not_text_message"
	RejectOwn        Verdict = "own_event"
	RejectRedacted   Verdict = "redacted"
	RejectEdit       Verdict = "edit"
	RejectNotAddress Verdict = "not_addressed"
	// RejectReplyLookup means the reply target could not be checked; the
	// sync source retries the whole response rather than drop the event.
	RejectReplyLookup Verdict = "reply_lookup_failed"
)

// Accepted reports whether v makes the event an invocation.
func (v Verdict) Accepted() bool {
	return v == TriggerMention || v == TriggerAlias || v == TriggerReply
}

// ReplyChecker tells whether an event was sent by Lisa. The sync source
// asks the bot-event ledger first, then the homeserver.
type ReplyChecker func(ctx context.Context, room, eventID string) (bool, error)

// Classifier decides which timeline events invoke Lisa.
type Classifier struct {
	bot     id.UserID
	allowed map[id.RoomID]bool
	aliases []string // case-folded, including the full user ID
	fold    cases.Caser
}

// NewClassifier returns a classifier for Lisa's user ID, the allowed rooms
// and the configured aliases.
func NewClassifier(bot string, allowedRooms, aliases []string) *Classifier {
	c := &Classifier{bot: id.UserID(bot), allowed: map[id.RoomID]bool{}, fold: cases.Fold()}
	for _, r := range allowedRooms {
		c.allowed[id.RoomID(r)] = true
	}
	for _, a := range append(append([]string(nil), aliases...), bot) {
		if a = strings.TrimSpace(a); a != "" {
			c.aliases = append(c.aliases, c.fold.String(a))
		}
	}
	return c
}

// Classify inspects one timeline event of room. evt must be as received
// (content not yet parsed). On acceptance it returns the candidate.
func (c *Classifier) Classify(ctx context.Context, room id.RoomID, evt *event.Event, isLisa ReplyChecker) (*roompb.Candidate, Verdict) {
	if evt == nil || evt.ID == "" || evt.Sender == "" {
		return nil, RejectMalformed
	}
	if !c.allowed[room] {
		return nil, RejectRoom
	}
	if evt.Type != event.EventMessage {
		return nil, RejectType
	}
	if evt.Sender == c.bot {
		return nil, RejectOwn
	}
	if evt.Unsigned.RedactedBecause != nil {
		return nil, RejectRedacted
	}
	if evt.Content.Parsed == nil {
		if err := evt.Content.ParseRaw(evt.Type); err != nil {
			return nil, RejectMalformed
		}
	}
	msg, ok := evt.Content.Parsed.(*event.MessageEventContent)
	if !ok || msg == nil {
		return nil, RejectMalformed
	}
	if len(evt.Content.Raw) == 0 && len(evt.Content.VeryRaw) <= 2 {
		return nil, RejectRedacted // redacted content is empty
	}
	if msg.RelatesTo.GetReplaceID() != "" || msg.NewContent != nil {
		return nil, RejectEdit
	}
	if msg.MsgType != event.MsgText {
		return nil, RejectType
	}
	body := event.TrimReplyFallbackText(msg.Body)
	formatted := ""
	if msg.Format == event.FormatHTML {
		formatted = event.TrimReplyFallbackHTML(msg.FormattedBody)
	}
	if strings.TrimSpace(body) == "" {
		return nil, RejectMalformed
	}
	replyTo := msg.RelatesTo.GetReplyTo()
	trigger := RejectNotAddress
	switch {
	case msg.Mentions.Has(c.bot):
		trigger = TriggerMention
	case c.mentionsAlias(body):
		trigger = TriggerAlias
	case replyTo != "":
		ok, err := isLisa(ctx, string(room), string(replyTo))
		if err != nil {
			return nil, RejectReplyLookup
		}
		if ok {
			trigger = TriggerReply
		}
	}
	if !trigger.Accepted() {
		return nil, trigger
	}
	return &roompb.Candidate{
		RoomId:         string(room),
		EventId:        string(evt.ID),
		Sender:         string(evt.Sender),
		OriginTsMs:     evt.Timestamp,
		Trigger:        string(trigger),
		Body:           body,
		FormattedBody:  formatted,
		ReplyToEventId: string(replyTo),
	}, trigger
}

// mentionsAlias reports whether any alias occurs in body as a whole word:
// case-folded, and not preceded or followed by a letter, digit or
// underscore.
func (c *Classifier) mentionsAlias(body string) bool {
	text := c.fold.String(body)
	for _, a := range c.aliases {
		for from := 0; from <= len(text)-len(a); {
			i := strings.Index(text[from:], a)
			if i < 0 {
				break
			}
			start, end := from+i, from+i+len(a)
			if !wordRuneBefore(text, start) && !wordRuneAfter(text, end) {
				return true
			}
			from = start + 1
		}
	}
	return false
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

func wordRuneBefore(s string, i int) bool {
	if i == 0 {
		return false
	}
	r := []rune(s[:i])
	return isWordRune(r[len(r)-1])
}

func wordRuneAfter(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	for _, r := range s[i:] {
		return isWordRune(r)
	}
	return false
}
