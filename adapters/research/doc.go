// Package research provides Lisa's research tools: web_search (through a
// Searcher such as SearXNG), fetch_web_page (through a bounded,
// SSRF-guarded Fetcher) and html_to_markdown (through a Converter such as
// pandoc). Its [Service] is the tool pool's handler for all three: a tool
// call is a messages.ToolCall naming a session, answered with a
// messages.ToolResult, and every failure becomes a bounded result with a
// stable code.
//
// Each invocation opens its own session ([Service.Open]) and closes it
// when done ([Service.Close]); the number of open sessions is bounded. A
// session owns its invocation's artifact store (opaque random IDs), so
// one invocation can never read another's downloads. fetch_web_page
// fetches only URLs known to the session (from its search results, the
// invoking message and room context, and pages it fetched), so a model
// cannot send room text to a URL it made up; see knownurls.go.
//
// The package imports no other adapter and no actor: the data it takes
// from search and web pages is messages.SearchHit and messages.WebPage,
// and the URL rule it shares with the fetcher is passed in as a
// [URLValidator].
package research
