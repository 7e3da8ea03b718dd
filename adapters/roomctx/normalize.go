package roomctx

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages/roompb"
)

const (
	// redactedText stands in for the content of a redacted message.
	redactedText = "[message redacted]"
	// truncMarker follows a text cut at the character cap. It is not
	// counted against any budget.
	truncMarker = "…[truncated]"
	// maxEventIDBytes bounds event IDs taken from message content; longer
	// ones are malformed.
	maxEventIDBytes = 255
)

// turn is one normalized message: a timeline entry of the block or a reply
// excerpt.
type turn struct {
	id         id.EventID
	sender     id.UserID
	ts         int64 // origin_server_ts in ms; 0 if unknown
	msgType    event.MessageType
	full       string // normalized text before capping
	text       string // full, capped
	chars      int    // characters of text counted against budgets
	truncated  bool
	redacted   bool
	edited     bool
	assistant  bool // sent by Lisa
	invocation bool
	replyTo    id.EventID // as found in the content; may be malformed
	reply      *replyRef

	content *event.MessageEventContent // source of text; nil when redacted
}

// setText normalizes t.content into t.text, capped at maxChars. It reports
// whether any text remains.
func (t *turn) setText(maxChars int, trimFallback bool, memo *memos) bool {
	if t.redacted {
		t.full, t.text, t.chars, t.truncated = redactedText, redactedText, utf8.RuneCountInString(redactedText), false
		return true
	}
	text := messageText(t.content, trimFallback, memo)
	if text == "" {
		return false
	}
	t.full = text
	t.text, t.chars, t.truncated = capText(text, maxChars)
	return true
}

// invocationTurn builds the invoking message from the candidate, whose
// texts the classifier already freed of reply fallbacks.
func invocationTurn(c *roompb.Candidate, bot id.UserID, maxChars int, memo *memos) *turn {
	msg := &event.MessageEventContent{MsgType: event.MsgText, Body: c.GetBody()}
	if c.GetFormattedBody() != "" {
		msg.Format = event.FormatHTML
		msg.FormattedBody = c.GetFormattedBody()
	}
	t := &turn{
		id:         id.EventID(c.GetEventId()),
		sender:     id.UserID(c.GetSender()),
		ts:         max(c.GetOriginTsMs(), 0),
		msgType:    event.MsgText,
		assistant:  id.UserID(c.GetSender()) == bot,
		invocation: true,
		replyTo:    id.EventID(c.GetReplyToEventId()),
		content:    msg,
	}
	t.setText(maxChars, false, memo)
	return t
}

// edit is an m.replace event found in the window.
type edit struct {
	sender  id.UserID
	target  id.EventID
	content *event.MessageEventContent
}

// parseWindow turns the fetched history (oldest first) into turns. It
// drops events of other rooms, duplicates and the invocation itself, keeps
// text messages and redacted messages, and applies edits whose sender is
// the original sender. window maps the IDs of the returned turns; skipped
// holds the IDs of other same-room events seen, which are no valid reply
// targets.
func parseWindow(events []*event.Event, room id.RoomID, invocation id.EventID, bot id.UserID, maxChars int, memo *memos) (history []*turn, window map[id.EventID]*turn, skipped map[id.EventID]bool) {
	window = map[id.EventID]*turn{}
	skipped = map[id.EventID]bool{}
	var edits []edit
	for _, evt := range events {
		if evt == nil || evt.ID == "" || evt.ID == invocation || window[evt.ID] != nil || skipped[evt.ID] {
			continue
		}
		if evt.RoomID != "" && evt.RoomID != room {
			continue // never borrow from another room
		}
		if evt.Type.Type != event.EventMessage.Type || evt.StateKey != nil || evt.Sender == "" || evt.Timestamp <= 0 {
			skipped[evt.ID] = true
			continue
		}
		t := &turn{id: evt.ID, sender: evt.Sender, ts: evt.Timestamp, assistant: evt.Sender == bot}
		if isRedacted(evt) {
			t.redacted = true
			history = append(history, t)
			window[t.id] = t
			continue
		}
		msg, ok := messageContent(evt, memo)
		if !ok {
			skipped[evt.ID] = true
			continue
		}
		if target := msg.RelatesTo.GetReplaceID(); target != "" {
			skipped[evt.ID] = true // an edit is never a turn of its own
			if msg.NewContent != nil {
				edits = append(edits, edit{sender: evt.Sender, target: target, content: msg.NewContent})
			}
			continue
		}
		if !isTextType(msg.MsgType) {
			skipped[evt.ID] = true
			continue
		}
		t.msgType = msg.MsgType
		t.content = msg
		t.replyTo = msg.RelatesTo.GetNonFallbackReplyTo()
		history = append(history, t)
		window[t.id] = t
	}

	// Later edits win; only the original author may edit.
	for _, e := range edits {
		t := window[e.target]
		if t == nil || t.redacted || t.sender != e.sender {
			continue
		}
		mt := e.content.MsgType
		if mt == "" {
			mt = t.msgType
		}
		if !isTextType(mt) {
			continue
		}
		t.msgType, t.content, t.edited = mt, e.content, true
	}

	kept := history[:0]
	for _, t := range history {
		// Replacement content carries no reply fallback.
		if !t.setText(maxChars, !t.edited && t.replyTo != "", memo) {
			delete(window, t.id)
			skipped[t.id] = true
			continue
		}
		kept = append(kept, t)
	}
	return kept, window, skipped
}

// targetTurn normalizes an event fetched as a reply target. It returns
// nil if the event is no usable text message of room: another room, a
// redaction, an edit, a non-text message or malformed.
func targetTurn(evt *event.Event, want id.EventID, room id.RoomID, bot id.UserID, maxChars int, memo *memos) *turn {
	if evt == nil || evt.ID != want || (evt.RoomID != "" && evt.RoomID != room) ||
		evt.Type.Type != event.EventMessage.Type || evt.StateKey != nil || evt.Sender == "" || isRedacted(evt) {
		return nil
	}
	msg, ok := messageContent(evt, memo)
	if !ok || msg.RelatesTo.GetReplaceID() != "" || !isTextType(msg.MsgType) {
		return nil
	}
	t := &turn{
		id:        evt.ID,
		sender:    evt.Sender,
		ts:        max(evt.Timestamp, 0),
		msgType:   msg.MsgType,
		assistant: evt.Sender == bot,
		replyTo:   msg.RelatesTo.GetNonFallbackReplyTo(),
		content:   msg,
	}
	if !t.setText(maxChars, t.replyTo != "", memo) {
		return nil
	}
	return t
}

// isTextType reports whether a message type is conversational text.
func isTextType(t event.MessageType) bool {
	return t == event.MsgText || t == event.MsgNotice || t == event.MsgEmote
}

// isRedacted reports whether evt was redacted: the server says so, or its
// content is empty.
func isRedacted(evt *event.Event) bool {
	if evt.Unsigned.RedactedBecause != nil {
		return true
	}
	if evt.Content.Parsed != nil || len(evt.Content.Raw) > 0 {
		return false
	}
	raw := bytes.TrimSpace(evt.Content.VeryRaw)
	return len(raw) == 0 || string(raw) == "{}" || string(raw) == "null"
}

// messageContent decodes the content of a message event without touching
// evt, which belongs to the caller. Decodings go through memo (nil: not
// remembered); the result is shared and must not be modified.
func messageContent(evt *event.Event, memo *memos) (*event.MessageEventContent, bool) {
	if msg, ok := evt.Content.Parsed.(*event.MessageEventContent); ok {
		return msg, msg != nil
	}
	data := evt.Content.VeryRaw
	if len(data) == 0 {
		var err error
		if data, err = json.Marshal(evt.Content.Raw); err != nil {
			return nil, false
		}
	}
	return memo.decodeContent(data)
}

// messageText is the normalized text of a message: its Matrix HTML as
// Markdown-like text when present and non-empty, else its plain body.
// trimFallback removes a quoted reply fallback from the plain body. HTML
// conversions go through memo (nil: not remembered).
func messageText(msg *event.MessageEventContent, trimFallback bool, memo *memos) string {
	if msg == nil {
		return ""
	}
	if msg.Format == event.FormatHTML && strings.TrimSpace(msg.FormattedBody) != "" {
		if text := memo.htmlToText(msg.FormattedBody); text != "" {
			return text
		}
	}
	body := msg.Body
	if trimFallback {
		body = event.TrimReplyFallbackText(body)
	}
	return cleanText(body)
}

// cleanText makes text valid UTF-8 with \n line ends, without leading or
// trailing white space, and with at most one blank line in a row.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	lines := strings.Split(s, "\n")
	out := lines[:0]
	blank := 0
	for _, l := range lines {
		l = strings.TrimRightFunc(l, unicode.IsSpace)
		if l == "" {
			blank++
			if blank > 1 {
				continue
			}
		} else {
			blank = 0
		}
		out = append(out, l)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// escapedLen is what r costs once escaped in element text.
func escapedLen(r rune) int {
	switch r {
	case '&', '\r':
		return 5
	case '<':
		return 4
	}
	return 1
}

// escapedCost is the length of s once escaped in element text.
func escapedCost(s string) int {
	n := 0
	for _, r := range s {
		n += escapedLen(r)
	}
	return n
}

// capText cuts s where its escaped form would exceed maxChars characters
// and appends the truncation marker. It returns the text, the escaped
// characters kept and whether it cut. Counting the escaped form means a
// message of "&&&&" cannot blow the context budget fivefold.
func capText(s string, maxChars int) (string, int, bool) {
	cost := 0
	for idx, r := range s {
		c := escapedLen(r)
		if cost+c > maxChars {
			kept := strings.TrimRightFunc(s[:idx], unicode.IsSpace)
			return kept + truncMarker, escapedCost(kept), true
		}
		cost += c
	}
	return s, cost, false
}

// validEventID reports whether s looks like an event ID worth fetching.
func validEventID(s id.EventID) bool {
	if len(s) < 2 || len(s) > maxEventIDBytes || s[0] != '$' || !utf8.ValidString(string(s)) {
		return false
	}
	for _, r := range string(s) {
		if r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}
