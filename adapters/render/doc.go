// Package render turns Lisa's answers into the exact JSON content of a
// Matrix reply.
//
// The model's Markdown is untrusted. It is parsed once with goldmark, raw
// HTML disabled (raw HTML is shown as escaped text, never interpreted),
// and rendered twice from the same tree: to HTML, filtered by a bluemonday
// allowlist of Matrix's HTML subset in which links may only point to
// http, https and matrix URLs, never to a user (an unsafe link keeps its label as text and
// images become their alt text), and to the plain-text body by walking the
// AST. Links cannot mislead (links.go): a target with credentials or an
// invisible character is refused, a non-ASCII host is shown and followed
// in its xn-- form, and a link whose text names another host than its
// target's is shown as its target, in both bodies. Bidi controls are
// removed from everything Lisa sends. The renderer itself, never the
// model, appends the Sources section (validated http(s) URLs,
// de-duplicated, bounded, titles escaped and held to the link rule), and
// the reply carries the m.in_reply_to relation, an escaped and bounded
// fallback quote of the invoking message, an m.mentions naming only the
// invoking sender (so their client notifies them; links to users, which
// clients show as pills, stay text) and the org.lisabot.invocation field. The whole content stays within
// MaxContentBytes, cutting the answer with a visible marker if need be.
// Parsing is bounded too (bounds.go): an answer with too much markup is
// cut the same way, and nesting, emphasis delimiters, pending link
// openers and link destination scans beyond fixed bounds stay text, so
// rendering hostile Markdown costs bounded time and memory.
package render
