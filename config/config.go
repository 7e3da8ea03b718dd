package config

import (
	"log/slog"
	"strings"
	"time"
)

// Config is Lisa's whole configuration as read from the TOML file and the
// environment. It holds secret references, never secret values; see
// [Resolve] for turning it into something the daemon can run with.
//
// The koanf tags are the file's key names. They are a contract shared with
// operators and other tools: renaming one is a breaking change.
type Config struct {
	// Matrix describes the homeserver account and the rooms Lisa serves.
	Matrix MatrixConfig `koanf:"matrix"`
	// LLM describes the OpenAI-compatible model service and the tool loop.
	LLM LLMConfig `koanf:"llm"`
	// Persona points at the persona prompt and holds the in-character error
	// replies.
	Persona PersonaConfig `koanf:"persona"`
	// Context bounds the room history given to the model.
	Context ContextConfig `koanf:"context"`
	// Search configures the optional SearXNG endpoint behind web_search.
	Search SearchConfig `koanf:"search"`
	// Web bounds page downloads and the HTML-to-Markdown conversion.
	Web WebConfig `koanf:"web"`
	// Runtime holds process-level settings: storage, concurrency, timeouts
	// and logging.
	Runtime RuntimeConfig `koanf:"runtime"`
}

// MatrixConfig is the [matrix] section.
type MatrixConfig struct {
	// HomeserverURL is the client-server API base URL (http or https).
	HomeserverURL string `koanf:"homeserver_url"`
	// UserID is Lisa's own Matrix user ID, "@localpart:server".
	UserID string `koanf:"user_id"`
	// DeviceID is the device the access token belongs to.
	DeviceID string `koanf:"device_id"`
	// AccessToken references the Matrix access token; required.
	AccessToken SecretRef `koanf:"access_token"`
	// AllowedRoomIDs lists the rooms Lisa answers in, as "!opaque:server"
	// room IDs. Aliases are refused.
	AllowedRoomIDs []string `koanf:"allowed_room_ids"`
	// MentionAliases are the plain-text names that count as mentioning
	// Lisa, matched as whole words without regard to case.
	MentionAliases []string `koanf:"mention_aliases"`
	// SyncTimeoutMS is the server-side long-poll timeout of /sync.
	SyncTimeoutMS int `koanf:"sync_timeout_ms"`
	// SyncTimelineLimit is the per-room timeline limit requested from /sync.
	SyncTimelineLimit int `koanf:"sync_timeline_limit"`
	// GapPageLimit bounds how many /messages pages are fetched to fill a
	// limited (gappy) timeline.
	GapPageLimit int `koanf:"gap_page_limit"`
	// LateStoreSeconds is how long a homeserver that restarted may still
	// store a send Lisa saw fail. A reply whose send failed while the
	// homeserver may have been restarting is sent again only after this
	// long; until then Lisa keeps looking for it. Dendrite needs 330 (its
	// queue redelivers a send cut short by a restart after 5 min 10 s); 0
	// disables holding.
	LateStoreSeconds int `koanf:"late_store_seconds"`
	// TxnIDsSurviveRestart says whether the homeserver recognises a send's
	// transaction ID again after it restarted, so that a reply whose send
	// is in doubt can be sent again at once with its original transaction
	// ID instead of being held for LateStoreSeconds: "auto" (decided from
	// what the server says it is, "no" whenever unsure), "yes" or "no".
	TxnIDsSurviveRestart string `koanf:"txn_ids_survive_restart"`
}

// LLMConfig is the [llm] section.
type LLMConfig struct {
	// BaseURL is the OpenAI-compatible API root; it ends in "/v1".
	BaseURL string `koanf:"base_url"`
	// APIKey references the API key; empty for services without one.
	APIKey SecretRef `koanf:"api_key"`
	// Model is the model name sent with every request.
	Model string `koanf:"model"`
	// RequestTimeoutSeconds bounds one LLM HTTP request.
	RequestTimeoutSeconds int `koanf:"request_timeout_seconds"`
	// MaxOutputTokens is sent as the completion token limit.
	MaxOutputTokens int `koanf:"max_output_tokens"`
	// MaxRequestCharacters bounds the characters of one whole request.
	MaxRequestCharacters int `koanf:"max_request_characters"`
	// MaxResponseCharacters bounds the characters accepted from one
	// response.
	MaxResponseCharacters int `koanf:"max_response_characters"`
	// MaxIterations bounds the LLM requests of one invocation, repair
	// requests included.
	MaxIterations int `koanf:"max_iterations"`
	// MaxToolCalls bounds the tool calls of one invocation, failed and
	// invalid calls included.
	MaxToolCalls int `koanf:"max_tool_calls"`
	// MaxParallelToolCalls bounds the tool calls of one model turn that
	// run at once; 1 runs them one after another.
	MaxParallelToolCalls int `koanf:"max_parallel_tool_calls"`
	// Temperature is the sampling temperature, 0..2; nil (the key left
	// out) sends none, so the server uses its default: some models refuse
	// any other value.
	Temperature *float64 `koanf:"temperature"`
	// TokenLimitParameter names the request field MaxOutputTokens is sent
	// in: "max_tokens" or "max_completion_tokens" (OpenAI's reasoning
	// models refuse max_tokens).
	TokenLimitParameter string `koanf:"token_limit_parameter"`
	// ResponseFormat is the structured output asked for on requests in
	// which no tool may be called: "json_schema", "json_object" or "none".
	ResponseFormat string `koanf:"response_format"`
	// TextToolCalls says when Lisa runs tool calls the model writes into
	// its text (<tool_call>…</tool_call>) when the server did not parse
	// them: TextToolCallsAuto, TextToolCallsAlways or TextToolCallsNever.
	// The booleans of earlier versions still load: true is "auto", false
	// "never".
	TextToolCalls string `koanf:"text_tool_calls"`
	// ContextWindowTokens is the model's context window: every request
	// stays within it less MaxOutputTokens.
	ContextWindowTokens int `koanf:"context_window_tokens"`
	// DailyTokenBudget caps the tokens (prompt and completion) the whole
	// deployment may use per day in persona.time_zone; 0 is no limit.
	DailyTokenBudget int `koanf:"daily_token_budget"`
	// RoomDailyTokenBudget caps the tokens each room may use per day; 0
	// is no limit.
	RoomDailyTokenBudget int `koanf:"room_daily_token_budget"`
}

// PersonaConfig is the [persona] section.
type PersonaConfig struct {
	// Path is the persona prompt file. A relative path is resolved against
	// the directory of the configuration file.
	Path string `koanf:"path"`
	// GenericError is the in-character reply sent when an invocation fails.
	GenericError string `koanf:"generic_error"`
	// OverloadError is the in-character reply sent when an invocation runs
	// out of time, iterations or budget.
	OverloadError string `koanf:"overload_error"`
	// BudgetError is the in-character reply to the first question of the
	// day in a room after a token budget is spent.
	BudgetError string `koanf:"budget_error"`
	// TimeZone is the IANA time zone (e.g. "Europe/Berlin") in which the
	// system prompt gives the current date and time, besides UTC.
	TimeZone string `koanf:"time_zone"`
}

// ContextConfig is the [context] section.
type ContextConfig struct {
	// MaxEvents bounds the room events given to the model, the invoking
	// event included.
	MaxEvents int `koanf:"max_events"`
	// MaxCharacters bounds the characters of the whole room context.
	MaxCharacters int `koanf:"max_characters"`
	// MaxEventCharacters caps each single event's text.
	MaxEventCharacters int `koanf:"max_event_characters"`
	// MaxReplyDepth bounds how far reply chains are followed.
	MaxReplyDepth int `koanf:"max_reply_depth"`
	// WindowStepEvents is how far the excerpt's start moves at once: it
	// stays put while the window fills up and then moves this many events,
	// so successive requests share their beginning (a prompt prefix an LLM
	// server can reuse). A value above MaxEvents acts as MaxEvents.
	WindowStepEvents int `koanf:"window_step_events"`
}

// SearchConfig is the [search] section. Web search is optional: with an
// empty Endpoint the web_search tool is not offered to the model.
type SearchConfig struct {
	// Endpoint is the SearXNG search URL, queried as
	// GET Endpoint?q=...&format=json. Empty disables web_search.
	Endpoint string `koanf:"endpoint"`
	// APIKey optionally references a key for the search service.
	APIKey SecretRef `koanf:"api_key"`
	// MaxResults bounds the results returned to the model.
	MaxResults int `koanf:"max_results"`
	// TimeoutSeconds bounds one search request.
	TimeoutSeconds int `koanf:"timeout_seconds"`
}

// Enabled reports whether a search endpoint is configured.
func (s SearchConfig) Enabled() bool { return s.Endpoint != "" }

// Timeout returns TimeoutSeconds as a duration.
func (s SearchConfig) Timeout() time.Duration { return seconds(s.TimeoutSeconds) }

// WebConfig is the [web] section.
type WebConfig struct {
	// ConnectTimeoutSeconds bounds establishing a connection.
	ConnectTimeoutSeconds int `koanf:"connect_timeout_seconds"`
	// ReadTimeoutSeconds bounds waiting for the next bytes of a response.
	ReadTimeoutSeconds int `koanf:"read_timeout_seconds"`
	// TotalTimeoutSeconds bounds one whole download, redirects included.
	TotalTimeoutSeconds int `koanf:"total_timeout_seconds"`
	// MaxRedirects bounds the redirects followed by one download.
	MaxRedirects int `koanf:"max_redirects"`
	// MaxDownloadBytes bounds the body of one download.
	MaxDownloadBytes int `koanf:"max_download_bytes"`
	// MaxToolOutputCharacters bounds the text one tool call returns to the
	// model.
	MaxToolOutputCharacters int `koanf:"max_tool_output_characters"`
	// MaxTotalArtifactBytes bounds all artifacts one invocation keeps.
	MaxTotalArtifactBytes int `koanf:"max_total_artifact_bytes"`
	// Converter chooses the html_to_markdown converter: [ConverterPandoc]
	// (the pandoc executable, the default) or [ConverterBuiltin] (pure Go,
	// inside the daemon).
	Converter string `koanf:"converter"`
	// PandocTimeoutSeconds bounds one HTML-to-Markdown conversion, with
	// either converter (the name predates the built-in one).
	PandocTimeoutSeconds int `koanf:"pandoc_timeout_seconds"`
	// UserAgent is sent with every download.
	UserAgent string `koanf:"user_agent"`
	// AllowPrivateAddresses lets downloads reach private, loopback,
	// link-local and metadata addresses. Off by default; meant for tests
	// and closed networks.
	AllowPrivateAddresses bool `koanf:"allow_private_addresses"`
}

// ConnectTimeout returns ConnectTimeoutSeconds as a duration.
func (w WebConfig) ConnectTimeout() time.Duration { return seconds(w.ConnectTimeoutSeconds) }

// ReadTimeout returns ReadTimeoutSeconds as a duration.
func (w WebConfig) ReadTimeout() time.Duration { return seconds(w.ReadTimeoutSeconds) }

// TotalTimeout returns TotalTimeoutSeconds as a duration.
func (w WebConfig) TotalTimeout() time.Duration { return seconds(w.TotalTimeoutSeconds) }

// The values of web.converter.
const (
	// ConverterPandoc converts with the pandoc executable (2.15 or newer,
	// for --sandbox). It is the default.
	ConverterPandoc = "pandoc"
	// ConverterBuiltin converts inside the daemon, in pure Go, with the
	// same bounds; it needs nothing installed.
	ConverterBuiltin = "builtin"
)

// PandocTimeout returns PandocTimeoutSeconds as a duration.
func (w WebConfig) PandocTimeout() time.Duration { return seconds(w.PandocTimeoutSeconds) }

// RuntimeConfig is the [runtime] section.
type RuntimeConfig struct {
	// DataDir is the Badger database directory. A relative path is
	// resolved against the directory of the configuration file.
	DataDir string `koanf:"data_dir"`
	// MaxConcurrentRooms bounds the rooms with an active invocation.
	MaxConcurrentRooms int `koanf:"max_concurrent_rooms"`
	// InvocationTimeoutSeconds bounds one whole invocation.
	InvocationTimeoutSeconds int `koanf:"invocation_timeout_seconds"`
	// ShutdownGraceSeconds bounds the wait for running work on shutdown.
	ShutdownGraceSeconds int `koanf:"shutdown_grace_seconds"`
	// LogLevel is debug, info, warn or error, in any letter case.
	LogLevel string `koanf:"log_level"`
	// AdminSocket is the Unix socket of the debug shell and health check.
	// Empty means "admin.sock" inside DataDir (see [Config.WithDefaults]).
	AdminSocket string `koanf:"admin_socket"`
	// RoomQueueLimit caps the unfinished invocations one room holds; a
	// mention beyond it is refused (one in-character overload reply per
	// burst, then only a log line).
	RoomQueueLimit int `koanf:"room_queue_limit"`
	// SenderRateLimit caps the invocations one member may queue in a room
	// within SenderRateWindowSeconds; 0 turns the per-sender limit off.
	SenderRateLimit int `koanf:"sender_rate_limit"`
	// SenderRateWindowSeconds is the window of SenderRateLimit, and the
	// shortest time between two overload replies in a room.
	SenderRateWindowSeconds int `koanf:"sender_rate_window_seconds"`
	// WaitReaction is the reaction Lisa puts on an invoking message whose
	// answer has been pending for WaitReactionSeconds; she removes it when
	// she answers. Empty turns it off.
	WaitReaction string `koanf:"wait_reaction"`
	// WaitReactionSeconds is how long an invocation may wait (queued
	// behind others or running) before it gets WaitReaction.
	WaitReactionSeconds int `koanf:"wait_reaction_seconds"`
	// MetricsListen is the loopback host:port of the Prometheus endpoint
	// (/metrics). Empty turns it off. Non-loopback addresses are refused.
	MetricsListen string `koanf:"metrics_listen"`
	// TrailEvents is how many recent events the event trail keeps per
	// room, in memory (lisa shell: why, trail; the status page).
	TrailEvents int `koanf:"trail_events"`
	// RetentionDays is how long routed markers, token usage records and
	// budget notices are kept in the data dir; Lisa never answers a
	// message sent longer ago (see [RuntimeConfig.Retention]).
	RetentionDays int `koanf:"retention_days"`
	// StatusListen is the host:port of the status page (/ and
	// /status.json). Empty turns it off. Only loopback addresses, unless
	// StatusAllowRemote is set with a StatusToken.
	StatusListen string `koanf:"status_listen"`
	// StatusAllowRemote allows a non-loopback StatusListen; StatusToken
	// is then required, and every request must carry it.
	StatusAllowRemote bool `koanf:"status_allow_remote"`
	// StatusToken is the status page's bearer token, as env:NAME:
	// required with StatusAllowRemote, and on a loopback page it keeps
	// other users of the machine out. Resolve refuses one with under
	// 128 bits of randomness (see TokenStrengthBits).
	StatusToken SecretRef `koanf:"status_token"`
}

// Retention returns RetentionDays as a duration.
func (r RuntimeConfig) Retention() time.Duration {
	return time.Duration(r.RetentionDays) * 24 * time.Hour
}

// InvocationTimeout returns InvocationTimeoutSeconds as a duration.
func (r RuntimeConfig) InvocationTimeout() time.Duration {
	return seconds(r.InvocationTimeoutSeconds)
}

// WaitReactionAfter returns WaitReactionSeconds as a duration.
func (r RuntimeConfig) WaitReactionAfter() time.Duration { return seconds(r.WaitReactionSeconds) }

// SenderRateWindow returns SenderRateWindowSeconds as a duration.
func (r RuntimeConfig) SenderRateWindow() time.Duration { return seconds(r.SenderRateWindowSeconds) }

// ShutdownGrace returns ShutdownGraceSeconds as a duration.
func (r RuntimeConfig) ShutdownGrace() time.Duration { return seconds(r.ShutdownGraceSeconds) }

// SlogLevel returns LogLevel as a slog level; an unknown level (which
// Validate rejects) maps to info.
func (r RuntimeConfig) SlogLevel() slog.Level {
	switch strings.ToLower(r.LogLevel) {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// LateStore returns LateStoreSeconds as a duration.
func (m MatrixConfig) LateStore() time.Duration {
	return time.Duration(m.LateStoreSeconds) * time.Second
}

// SyncTimeout returns SyncTimeoutMS as a duration.
func (m MatrixConfig) SyncTimeout() time.Duration {
	return time.Duration(m.SyncTimeoutMS) * time.Millisecond
}

// SyncRequestTimeout is the HTTP client timeout to use for one /sync
// request: the long-poll timeout plus [SyncRequestSlack].
func (m MatrixConfig) SyncRequestTimeout() time.Duration {
	return m.SyncTimeout() + SyncRequestSlack
}

// RequestTimeout returns RequestTimeoutSeconds as a duration.
func (l LLMConfig) RequestTimeout() time.Duration { return seconds(l.RequestTimeoutSeconds) }

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }
