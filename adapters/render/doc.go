// Package render turns the model's Markdown into the exact content of a
// Matrix reply: goldmark with raw HTML disabled, then bluemonday with an
// allowlist of the HTML Matrix clients render (links only to http, https
// and matrix URLs), a plain-text body, and the reply relation to the
// invoking event.
package render
