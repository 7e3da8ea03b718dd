package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

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
	TriggerMention Verdict = "mention" // structured m.mentions
	TriggerAlias   Verdict = "alias"   // an alias as a whole word in the body
	TriggerReply   Verdict = "reply"   // a reply to one of Lisa's events
	// TriggerEdit is an edit of a message that was routed to its room
	// (it invoked Lisa): the room answers the new text if it has not
	// started on the old one.
	TriggerEdit Verdict = "edit_update"
	// TriggerRedaction is a redaction in an allowed room of a message
	// that was routed to it: the room drops the invocation it removes, or
	// redacts the reply to it.
	TriggerRedaction Verdict = "redaction"
	// RejectRedactionOther is a redaction of a message that was never
	// routed to its room (chatter, history): nothing of Lisa's relates to
	// it.
	RejectRedactionOther Verdict = "redaction_of_other"
	RejectMalformed      Verdict = "malformed"
	RejectRoom           Verdict = "room_not_allowed"
	RejectType           Verdict = "not_text_message"
	RejectOwn            Verdict = "own_event"
	RejectRedacted       Verdict = "redacted"
	// RejectEdit is an edit (m.replace) of a message that did not invoke
	// Lisa: an edit is never an invocation, even one that adds a mention
	// or an alias.
	RejectEdit       Verdict = "edit"
	RejectNotAddress Verdict = "not_addressed"
	// RejectReplyLookup means the reply target could not be checked for
	// now (the homeserver unreachable, a 5xx, 429 or 408 answer, the
	// ledger failing); the sync source fails the whole answer rather than
	// drop the event, within the bound of RejectReplyLookupAbandoned.
	RejectReplyLookup Verdict = "reply_lookup_failed"
	// RejectReplyTargetInvalid means the event replies to something that
	// cannot be an event ID (see validEventID): it is not a reply to
	// Lisa, and neither the ledger nor the homeserver is asked.
	RejectReplyTargetInvalid Verdict = "reply_target_invalid"
	// RejectReplyTargetRejected means the homeserver answered the lookup
	// of the reply target with a permanent client error other than 403 or
	// 404 (ErrReplyTargetRejected): asking again would get the same
	// answer, so the event is not a reply to Lisa.
	RejectReplyTargetRejected Verdict = "reply_target_rejected"
	// RejectReplyLookupAbandoned means the reply target of the event could
	// not be checked in several consecutive answers over a long time (see
	// replyLookupStallAnswers); the sync source stopped holding every
	// room back for it and counts it as not a reply to Lisa.
	RejectReplyLookupAbandoned Verdict = "reply_lookup_abandoned"
)

// ErrReplyTargetRejected is returned, wrapped, by a ReplyChecker when the
// homeserver refused the lookup for good: the target is not Lisa's.
var ErrReplyTargetRejected = errors.New("matrix: the homeserver refused to look up the reply target")

// Accepted reports whether v makes the event an invocation.
func (v Verdict) Accepted() bool {
	switch v {
	case TriggerMention, TriggerAlias, TriggerReply, TriggerEdit, TriggerRedaction:
		return true
	}
	return false
}

// ReplyChecker tells whether an event was sent by Lisa. The sync source
// asks the bot-event ledger first, then the homeserver. It returns an error
// wrapping ErrReplyTargetRejected when the answer is a permanent refusal
// (the event is then not a reply to Lisa), and any other error when the
// target could not be checked for now. It is only asked about targets
// that pass validEventID.
type ReplyChecker func(ctx context.Context, room, eventID string) (bool, error)

// maxEventIDBytes is the specification's limit on the length of Matrix
// identifiers, event IDs included.
const maxEventIDBytes = 255

// validEventID reports whether s can be an event ID, so that it is worth
// looking up: "$" and at least one more character, at most
// maxEventIDBytes bytes, all of them printable ASCII without spaces. That
// covers every room version ("$opaque:server" in versions 1 and 2, "$"
// and 43 characters of standard or URL-safe base64 from version 3 on).
// Anything else (a 60 KB string, "not-an-id", control characters) cannot
// name an event of Lisa's, and asking the homeserver about it only gets
// errors: 400, or 414 from a proxy.
func validEventID(s string) bool {
	if len(s) < 2 || len(s) > maxEventIDBytes || s[0] != '$' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

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
	msg, verdict := parseMessage(evt)
	if msg == nil {
		return nil, verdict
	}
	if msg.RelatesTo.GetReplaceID() != "" || msg.NewContent != nil {
		return nil, RejectEdit
	}
	if msg.MsgType != event.MsgText {
		return nil, RejectType
	}
	body, formatted := messageText(msg)
	if strings.TrimSpace(body) == "" {
		return nil, RejectMalformed
	}
	// In a thread, m.in_reply_to may only be the fallback that clients
	// without threads show (is_falling_back): that is no reply to anyone.
	replyTo := msg.RelatesTo.GetNonFallbackReplyTo()
	trigger := c.addressed(msg, body)
	switch {
	case trigger.Accepted():
	case replyTo != "" && !validEventID(string(replyTo)):
		trigger = RejectReplyTargetInvalid
	case replyTo != "":
		ok, err := isLisa(ctx, string(room), string(replyTo))
		switch {
		case errors.Is(err, ErrReplyTargetRejected):
			trigger = RejectReplyTargetRejected
		case err != nil:
			return nil, RejectReplyLookup
		case ok:
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

		ThreadRootEventId: threadRoot(msg),
	}, trigger
}

// parseMessage returns the parsed content of a message event, or nil and
// why it cannot be one: redacted, or malformed.
func parseMessage(evt *event.Event) (*event.MessageEventContent, Verdict) {
	if evt.Unsigned.RedactedBecause != nil {
		return nil, RejectRedacted
	}
	if evt.Content.Parsed == nil {
		if err := evt.Content.ParseRaw(event.EventMessage); err != nil {
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
	return msg, ""
}

// messageText returns a message's plain body and its HTML body (empty
// unless the format is HTML), without reply fallbacks.
func messageText(msg *event.MessageEventContent) (body, formatted string) {
	body = event.TrimReplyFallbackText(msg.Body)
	if msg.Format == event.FormatHTML {
		formatted = event.TrimReplyFallbackHTML(msg.FormattedBody)
	}
	return body, formatted
}

// addressed reports how a message's own text addresses Lisa: a structured
// mention, an alias in the body, or not at all (RejectNotAddress).
func (c *Classifier) addressed(msg *event.MessageEventContent, body string) Verdict {
	switch {
	case msg.Mentions.Has(c.bot):
		return TriggerMention
	case c.mentionsAlias(body):
		return TriggerAlias
	}
	return RejectNotAddress
}

// threadRoot returns the root of the thread msg is in, or "" outside a
// thread (or when the root cannot be an event ID).
func threadRoot(msg *event.MessageEventContent) string {
	root := string(msg.RelatesTo.GetThreadParent())
	if !validEventID(root) {
		return ""
	}
	return root
}

// Redaction classifies a redaction event of room: in an allowed room and
// not Lisa's own, it is handed to the room, which decides whether it
// removes an invocation or a question she answered.
func (c *Classifier) Redaction(room id.RoomID, evt *event.Event) (*roompb.Candidate, Verdict) {
	switch {
	case evt == nil || evt.ID == "" || evt.Sender == "":
		return nil, RejectMalformed
	case !c.allowed[room]:
		return nil, RejectRoom
	case evt.Type != event.EventRedaction:
		return nil, RejectType
	case evt.Sender == c.bot:
		return nil, RejectOwn
	}
	target := evt.Redacts
	if target == "" {
		var content struct {
			Redacts id.EventID `json:"redacts"`
		}
		if err := json.Unmarshal(evt.Content.VeryRaw, &content); err == nil {
			target = content.Redacts
		}
	}
	if !validEventID(string(target)) {
		return nil, RejectMalformed
	}
	return &roompb.Candidate{
		RoomId: string(room), EventId: string(evt.ID), Sender: string(evt.Sender),
		OriginTsMs: evt.Timestamp, Trigger: string(TriggerRedaction), RedactsEventId: string(target),
	}, TriggerRedaction
}

// Edit checks the edit event's own part of an edit (m.replace): in an
// allowed room, not Lisa's, a text message replacing a valid event ID
// with non-empty text. It returns the original's ID and the new content;
// whether the edit invokes Lisa depends on the original (see
// Source.classifyEdit).
func (c *Classifier) Edit(room id.RoomID, evt *event.Event) (id.EventID, *event.MessageEventContent, Verdict) {
	switch {
	case evt == nil || evt.ID == "" || evt.Sender == "":
		return "", nil, RejectMalformed
	case !c.allowed[room]:
		return "", nil, RejectRoom
	case evt.Type != event.EventMessage:
		return "", nil, RejectType
	case evt.Sender == c.bot:
		return "", nil, RejectOwn
	}
	msg, verdict := parseMessage(evt)
	if msg == nil {
		return "", nil, verdict
	}
	orig := msg.RelatesTo.GetReplaceID()
	if orig == "" {
		return "", nil, RejectType
	}
	nc := msg.NewContent
	if !validEventID(string(orig)) || nc == nil {
		return "", nil, RejectMalformed
	}
	if nc.MsgType != event.MsgText {
		return "", nil, RejectType
	}
	if body, _ := messageText(nc); strings.TrimSpace(body) == "" {
		return "", nil, RejectMalformed
	}
	return orig, nc, ""
}

// IsEdit reports whether evt is an edit (m.replace) of another message.
func IsEdit(evt *event.Event) bool {
	if evt == nil || evt.Type != event.EventMessage {
		return false
	}
	var content struct {
		RelatesTo struct {
			RelType string `json:"rel_type"`
		} `json:"m.relates_to"`
	}
	if evt.Content.Parsed != nil {
		msg, ok := evt.Content.Parsed.(*event.MessageEventContent)
		return ok && msg.RelatesTo.GetReplaceID() != ""
	}
	return json.Unmarshal(evt.Content.VeryRaw, &content) == nil && content.RelatesTo.RelType == string(event.RelReplace)
}

// mentionsAlias reports whether any alias occurs in body as a whole word:
// case-folded, and not preceded or followed by a letter, digit, combining
// mark or underscore. (A combining mark belongs to the word before it:
// "ΐ" folds to "ι" and two marks, and "ΐlisa" is not a mention.)
//
// The cost is linear in the body for each alias: folding is one pass,
// each strings.Index call resumes after the previous occurrence, and the
// runes around an occurrence are decoded in constant time. (Converting the
// text before every occurrence to runes made a 60 KB body of "lisalisa…"
// cost seconds of CPU and gigabytes of garbage per event.)
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

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || r == '_'
}

// wordRuneBefore reports whether the rune ending at byte i of s is a word
// rune. Invalid UTF-8 decodes as utf8.RuneError, which is not.
func wordRuneBefore(s string, i int) bool {
	if i <= 0 {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return isWordRune(r)
}

// wordRuneAfter reports whether the rune starting at byte i of s is a word
// rune.
func wordRuneAfter(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return isWordRune(r)
}
