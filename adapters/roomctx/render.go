package roomctx

import (
	"strings"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
)

// unavailableText is the body of a reply reference whose target cannot be
// shown.
const unavailableText = "reply target unavailable"

// render writes the block: one <message> per turn in order, each with its
// reply reference. Every attribute value and text is escaped.
func render(room id.RoomID, turns []*turn, name func(id.UserID) string) string {
	return renderExcerpt(room, turns, name).Block()
}

// renderExcerpt is render in parts: the opening tag, one part per turn,
// the closing tag.
func renderExcerpt(room id.RoomID, turns []*turn, name func(id.UserID) string) messages.Excerpt {
	var open strings.Builder
	open.WriteString("<room_context")
	writeAttr(&open, "room_id", string(room))
	open.WriteString(">\n")
	ex := messages.Excerpt{Open: open.String(), Close: "</room_context>", Events: make([]string, 0, len(turns))}
	for _, t := range turns {
		var w strings.Builder
		w.WriteString("<message")
		writeTurnAttrs(&w, t, name)
		if t.invocation {
			writeAttr(&w, "invocation", "true")
		}
		w.WriteString(">\n")
		writeText(&w, t.text)
		w.WriteString("\n")
		writeReply(&w, t.reply, name)
		w.WriteString("</message>\n")
		ex.Events = append(ex.Events, w.String())
	}
	return ex
}

// writeTurnAttrs writes the attributes a message and an excerpt share.
func writeTurnAttrs(w *strings.Builder, t *turn, name func(id.UserID) string) {
	writeAttr(w, "event_id", string(t.id))
	writeAttr(w, "author_id", string(t.sender))
	writeAttr(w, "author_name", name(t.sender))
	if t.ts > 0 {
		writeAttr(w, "timestamp", time.UnixMilli(t.ts).UTC().Format(time.RFC3339))
	}
	if t.msgType != "" && t.msgType != event.MsgText {
		writeAttr(w, "msgtype", string(t.msgType))
	}
	for _, f := range []struct {
		name string
		on   bool
	}{{"assistant", t.assistant}, {"edited", t.edited}, {"redacted", t.redacted}, {"truncated", t.truncated}} {
		if f.on {
			writeAttr(w, f.name, "true")
		}
	}
}

// writeReply writes a reply reference, nesting the excerpt's own reply.
func writeReply(w *strings.Builder, r *replyRef, name func(id.UserID) string) {
	switch {
	case r == nil:
	case r.inBlock:
		w.WriteString("<reply_to")
		writeAttr(w, "event_id", string(r.eventID))
		w.WriteString(" />\n")
	case r.target != nil:
		w.WriteString("<reply_to")
		writeTurnAttrs(w, r.target, name)
		w.WriteString(">\n")
		writeText(w, r.target.text)
		w.WriteString("\n")
		writeReply(w, r.target.reply, name)
		w.WriteString("</reply_to>\n")
	default:
		w.WriteString("<reply_to")
		if r.eventID != "" {
			writeAttr(w, "event_id", string(r.eventID))
		}
		writeAttr(w, "status", r.status)
		if r.status == statusUnavailable {
			w.WriteString(">" + unavailableText + "</reply_to>\n")
		} else {
			w.WriteString(" />\n")
		}
	}
}

// writeAttr writes ` key="value"` with value escaped for a double-quoted
// attribute on one line.
func writeAttr(w *strings.Builder, key, value string) {
	w.WriteString(" ")
	w.WriteString(key)
	w.WriteString(`="`)
	escape(w, value, true)
	w.WriteString(`"`)
}

// writeText writes element text, escaped.
func writeText(w *strings.Builder, s string) { escape(w, s, false) }

// escape writes s so that it can only be read as character data: & and <
// become references, characters XML forbids become U+FFFD, and in
// attributes >, quotes and line breaks are encoded too. In text, > stays
// readable (Markdown quotes) unless it would end "]]>".
func escape(w *strings.Builder, s string, attr bool) {
	for i, r := range s {
		switch {
		case r == '&':
			w.WriteString("&amp;")
		case r == '<':
			w.WriteString("&lt;")
		case r == '>' && (attr || strings.HasSuffix(s[:i], "]]")):
			w.WriteString("&gt;")
		case attr && r == '"':
			w.WriteString("&quot;")
		case attr && r == '\'':
			w.WriteString("&#39;")
		case attr && r == '\n':
			w.WriteString("&#10;")
		case attr && r == '\t':
			w.WriteString("&#9;")
		case r == '\r':
			w.WriteString("&#13;")
		case !isXMLChar(r):
			w.WriteRune('\uFFFD')
		default:
			w.WriteRune(r)
		}
	}
}

// isXMLChar reports whether XML 1.0 allows r in a document.
func isXMLChar(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' ||
		(r >= 0x20 && r <= 0xd7ff) || (r >= 0xe000 && r <= 0xfffd) || (r >= 0x10000 && r <= 0x10ffff)
}
