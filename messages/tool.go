package messages

import (
	"encoding/json"
	"time"
)

// Tool failure codes of the tool pool itself (see also toolerr.go).
const (
	// ToolBusy: the tool pool's queue was full; the call was not run.
	ToolBusy ToolCode = "busy"
	// ToolUnknownTool: no tool of that name is registered or offered.
	ToolUnknownTool ToolCode = "unknown_tool"
)

// ToolCall is one tool call sent to the tool pool. It is answered with
// exactly one *ToolResult.
type ToolCall struct {
	// Name is the tool's name, as offered to the model.
	Name string
	// Args is the JSON object of arguments, already checked against the
	// basic shape of the tool's schema.
	Args json.RawMessage
	// Deadline bounds the call; zero means the pool's own bound only.
	Deadline time.Time
	// Session names the per-invocation state the call belongs to (say,
	// the research session with its artifacts and known URLs); empty for
	// tools without any.
	Session string
}

// ToolResult is the outcome of one tool call. The LLM loop bounds it
// before the model sees it and serializes it as a JSON object: a success
// carries ok, content and source_urls; a failure carries ok, code,
// message and retryable.
type ToolResult struct {
	// OK reports success.
	OK bool
	// Code is a stable, non-sensitive failure code (a ToolCode value such
	// as "invalid_arguments" or "timeout"); "ok" or empty on success.
	Code string
	// Content is the output on success, or a short safe explanation on
	// failure.
	Content string
	// SourceURLs are the web sources this successful result drew on; only
	// these may be cited by the final answer.
	SourceURLs []string
	// Retryable tells the model, on failure, whether trying again may help.
	Retryable bool
	// SourceTitles optionally names sources by URL (as given in
	// SourceURLs), for the Sources section.
	SourceTitles map[string]string
	// Fetched lists the pages this successful call downloaded (a subset
	// of SourceURLs). When the model's answer cites nothing usable, the
	// host lists these as the Sources itself.
	Fetched []string
	// AfterEarlier marks a failure on state that the calls before this
	// one in the model's turn may change (a URL not known yet, which an
	// earlier call's results may make known): run after them, the call
	// could pass. The loop, which runs a turn's calls side by side, runs
	// such a call once more after the others.
	AfterEarlier bool
}

// ToolFailure returns the failure result for code with a short, safe
// message.
func ToolFailure(code ToolCode, message string, retryable bool) *ToolResult {
	return &ToolResult{Code: string(code), Content: message, Retryable: retryable}
}

// SearchHit is one web search result.
type SearchHit struct {
	// Title is the result's title, cleaned and bounded.
	Title string
	// URL is the result's absolute http or https URL.
	URL string
	// Snippet is the engine's short excerpt, cleaned and bounded.
	Snippet string
}

// WebPage is one successfully downloaded document.
type WebPage struct {
	// FinalURL is the URL after redirects, without fragment.
	FinalURL string
	// ContentType is the lower-case media type, with its charset
	// parameter when the server sent one.
	ContentType string
	// Title is the cleaned, bounded text of the first <title> of an HTML
	// page; empty for plain text or when there is none.
	Title string
	// Body holds the downloaded bytes, bounded by the fetcher and
	// undecoded.
	Body []byte
}
