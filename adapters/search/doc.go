// Package search is Lisa's web_search adapter: a small client for one
// operator-configured SearXNG instance's JSON API (design §13.1).
//
// The model supplies only the query text. The destination, the optional
// bearer key and every limit come from configuration. The client never
// follows redirects (a redirecting endpoint is a configuration error, and
// following it could hand the key to another origin), keeps no cookies,
// ignores proxy environment variables, caps the response body, and keeps
// only a title, a normalized http(s) URL and a bounded snippet per result.
//
// Every failure is a *messages.ToolError with a stable code and a short
// message that never echoes the query, the endpoint or the response body.
package search
