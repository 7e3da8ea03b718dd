// Package research provides Lisa's research tools to the orchestrator:
// web_search (SearXNG), fetch_web_page (bounded, SSRF-guarded) and
// html_to_markdown (pandoc). A Session is made per invocation and owns that
// invocation's artifact store, so one invocation can never read another's
// downloads. Every call runs in the tool pool, and every failure becomes a
// bounded tool result with a stable code.
package research
