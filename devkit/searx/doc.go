// Package searx is a small, in-process stand-in for a SearXNG instance's
// JSON search API, part of the local development stack `lisa demo` runs.
// It never imports testing (tests of the web_search adapter use the
// scripted testkit/searxfake instead).
//
// A [Server] listens on 127.0.0.1 on a random port and answers
// GET /search?q=…&format=json with the results of a fixed index, in the
// shape a real SearXNG instance uses ({"query", "number_of_results",
// "results": [{"url", "title", "content", "engine"}], "answers", ...}).
// Results that share a word with the query come first; when none does,
// the whole index is returned, so a real model's free-form query still
// finds the demo's pages. Every query is recorded (see [Server.Queries]).
//
// Use [Start], [Server.URL] and [Server.Close].
package searx
