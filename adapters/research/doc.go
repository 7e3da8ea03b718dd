// Package research provides Lisa's research tools to the orchestrator:
// web_search (SearXNG), fetch_web_page (bounded, SSRF-guarded) and
// html_to_markdown (pandoc). A Session is made per invocation and owns that
// invocation's artifact store, so one invocation can never read another's
// downloads. fetch_web_page fetches only URLs known to the invocation (from
// its search results, the invoking message and room context, and pages it
// fetched), so a model cannot send room text to a URL it made up; see
// knownurls.go. Every call runs in the tool pool, and every failure becomes
// a bounded tool result with a stable code.
package research
