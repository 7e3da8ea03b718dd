// Package searxfake is a scripted, in-process stand-in for a SearXNG
// instance's JSON search API, for tests of the web_search adapter.
//
// A [Server] listens on 127.0.0.1 on a random port and answers GET /search
// (the path is not enforced; the recorded [Request] carries it). Each request
// consumes the next scripted [Response] from a FIFO queue (see
// [Server.Enqueue]); once the queue is empty the default response (see
// [WithDefault]) answers instead.
//
// A [Response] can list results, which the server encodes in the shape a
// real SearXNG instance uses ({"query": ..., "number_of_results": ...,
// "results": [{"url", "title", "content", "engine", ...}], "answers": [],
// ...}); carry a raw body verbatim (for malformed JSON or huge bodies); set
// any status code; redirect elsewhere; and wait before answering, giving up
// as soon as the client cancels the request.
//
// Every request is recorded as a [Request]: the query string, the format,
// the full parameter set, and whether an Authorization header was present
// (and matched the configured key) — never the header value itself.
package searxfake
