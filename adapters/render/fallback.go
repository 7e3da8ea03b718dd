package render

import (
	"html"
	"strings"
)

// Bounds on the reply fallback.
const (
	// MaxFallbackRunes bounds the excerpt of the invoking message quoted
	// in the reply fallback.
	MaxFallbackRunes = 200
	// maxSenderBytes is the Matrix limit on a user ID's length.
	maxSenderBytes = 255
)

// Invoking is the message Lisa is answering. Sender and Body are untrusted
// and only ever appear escaped and bounded in the reply fallback.
type Invoking struct {
	// EventID is the invoking event; the reply relates to it.
	EventID string
	// Sender is the invoking event's sender, e.g. "@alice:example.org".
	Sender string
	// Body is the invoking event's plain-text body.
	Body string
	// ThreadRoot is the root of the thread the invoking event is in, or
	// "" on the main timeline. A reply to an event in a thread is sent in
	// that thread. A value that is not a plausible event ID is ignored.
	ThreadRoot string
}

// fallback is the legacy rich-reply fallback quoting the invoking message,
// in both formats; both are empty when there is nothing to quote.
type fallback struct {
	html, plain string
}

// replyFallback builds the fallback for inv: the sender and at most
// MaxFallbackRunes of its body (any fallback it carries itself removed),
// HTML-escaped inside mx-reply and quoted line by line in the plain body.
// Without a sender there is no fallback.
func replyFallback(inv Invoking) fallback {
	sender := truncateBytes(singleLine(inv.Sender), maxSenderBytes)
	if sender == "" {
		return fallback{}
	}
	body := strings.TrimSpace(stripFallback(cleanText(inv.Body)))
	var lines []string
	if body != "" {
		lines = strings.Split(ellipsize(body, MaxFallbackRunes), "\n")
	}

	var h, t strings.Builder
	h.WriteString("<mx-reply><blockquote>In reply to ")
	h.WriteString(html.EscapeString(sender))
	t.WriteString("> <")
	t.WriteString(sender)
	t.WriteString(">")
	for i, l := range lines {
		l = strings.TrimRight(l, " \t")
		h.WriteString("<br>")
		h.WriteString(html.EscapeString(l))
		switch {
		case i == 0 && l != "":
			t.WriteString(" " + l)
		case i > 0 && l == "":
			t.WriteString("\n>")
		case i > 0:
			t.WriteString("\n> " + l)
		}
	}
	h.WriteString("</blockquote></mx-reply>")
	return fallback{html: h.String(), plain: t.String()}
}

// stripFallback removes the reply fallback a body starts with when it is
// itself a reply: the leading lines that begin with ">" (the first one
// naming a user as "> <@user>" or "> * <@user>") and one blank line after.
func stripFallback(body string) string {
	if !strings.HasPrefix(body, "> <@") && !strings.HasPrefix(body, "> * <@") {
		return body
	}
	lines := strings.Split(body, "\n")
	i := 0
	for i < len(lines) && strings.HasPrefix(lines[i], ">") {
		i++
	}
	if i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	return strings.Join(lines[i:], "\n")
}
