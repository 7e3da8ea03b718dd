package config

import "time"

// Hard ceilings and floors. Validate rejects any value outside them, so a
// mistyped or hostile configuration can never ask for an unbounded download,
// a zero timeout or an enormous tool loop. Changing one of these is a code
// change, reviewed like any other.
const (
	// MinSyncTimeoutMS is the shortest accepted /sync long-poll. Shorter
	// polls would turn the sync loop into a busy loop against the
	// homeserver.
	MinSyncTimeoutMS = 100
	// MaxSyncTimeoutMS is the longest accepted /sync long-poll.
	MaxSyncTimeoutMS = 120_000
	// SyncRequestSlack is added to matrix.sync_timeout_ms to obtain the
	// HTTP client timeout of a /sync request (see
	// [MatrixConfig.SyncRequestTimeout]), so the client never gives up
	// before the server has had its full long-poll window.
	SyncRequestSlack = 30 * time.Second
	// MaxSyncTimelineLimit bounds matrix.sync_timeline_limit.
	MaxSyncTimelineLimit = 500
	// MaxGapPageLimit bounds matrix.gap_page_limit.
	MaxGapPageLimit = 100
	// MaxLateStoreSeconds bounds matrix.late_store_seconds.
	MaxLateStoreSeconds = 3600
	// MaxAllowedRooms bounds the length of matrix.allowed_room_ids.
	MaxAllowedRooms = 10_000
	// MaxMentionAliases bounds the length of matrix.mention_aliases.
	MaxMentionAliases = 32
	// MaxMentionAliasChars bounds the length of one mention alias, in
	// characters.
	MaxMentionAliasChars = 64
	// MaxMatrixIDBytes is the Matrix specification's limit on user and
	// room identifiers, sigil and server name included.
	MaxMatrixIDBytes = 255
	// MaxDeviceIDBytes bounds matrix.device_id.
	MaxDeviceIDBytes = 255

	// MaxLLMRequestTimeoutSeconds bounds llm.request_timeout_seconds.
	MaxLLMRequestTimeoutSeconds = 600
	// MaxOutputTokens bounds llm.max_output_tokens.
	MaxOutputTokens = 32_768
	// MaxTokenBudget bounds llm.daily_token_budget and
	// llm.room_daily_token_budget.
	MaxTokenBudget = 1_000_000_000_000
	// MaxRequestCharacters bounds llm.max_request_characters.
	MaxRequestCharacters = 1_000_000
	// MaxResponseCharacters bounds llm.max_response_characters.
	MaxResponseCharacters = 100_000
	// MinIterations is the smallest accepted llm.max_iterations: every LLM
	// request counts as an iteration, so using a tool at all needs one
	// request that calls it and one that answers.
	MinIterations = 2
	// MaxIterations bounds llm.max_iterations.
	MaxIterations = 32
	// MaxToolCalls bounds llm.max_tool_calls.
	MaxToolCalls = 64
	// MaxParallelToolCalls bounds llm.max_parallel_tool_calls.
	MaxParallelToolCalls = 16
	// MaxTemperature bounds llm.temperature (the OpenAI range is 0..2).
	MaxTemperature = 2.0
	// MaxModelNameChars bounds llm.model.
	MaxModelNameChars = 256
	// MinContextWindowTokens and MaxContextWindowTokens bound
	// llm.context_window_tokens.
	MinContextWindowTokens = 256
	MaxContextWindowTokens = 10_000_000

	// MaxPersonaBytes bounds the size of the persona file.
	MaxPersonaBytes = 64 << 10
	// MaxErrorMessageChars bounds persona.generic_error and
	// persona.overload_error, in characters.
	MaxErrorMessageChars = 1_000

	// MaxContextEvents bounds context.max_events.
	MaxContextEvents = 500
	// MaxContextCharacters bounds context.max_characters.
	MaxContextCharacters = 500_000
	// MaxEventCharacters bounds context.max_event_characters.
	MaxEventCharacters = 100_000
	// MaxReplyDepth bounds context.max_reply_depth.
	MaxReplyDepth = 10

	// MaxSearchResults bounds search.max_results.
	MaxSearchResults = 50
	// MaxSearchTimeoutSeconds bounds search.timeout_seconds.
	MaxSearchTimeoutSeconds = 120

	// MaxConnectTimeoutSeconds bounds web.connect_timeout_seconds.
	MaxConnectTimeoutSeconds = 60
	// MaxReadTimeoutSeconds bounds web.read_timeout_seconds.
	MaxReadTimeoutSeconds = 300
	// MaxTotalTimeoutSeconds bounds web.total_timeout_seconds.
	MaxTotalTimeoutSeconds = 600
	// MaxRedirects bounds web.max_redirects.
	MaxRedirects = 20
	// MaxDownloadBytes bounds web.max_download_bytes (50 MB).
	MaxDownloadBytes = 50_000_000
	// MaxToolOutputCharacters bounds web.max_tool_output_characters.
	MaxToolOutputCharacters = 500_000
	// MaxTotalArtifactBytes bounds web.max_total_artifact_bytes (200 MB).
	MaxTotalArtifactBytes = 200_000_000
	// MaxPandocTimeoutSeconds bounds web.pandoc_timeout_seconds.
	MaxPandocTimeoutSeconds = 120
	// MaxUserAgentChars bounds web.user_agent.
	MaxUserAgentChars = 256

	// MaxConcurrentRooms bounds runtime.max_concurrent_rooms.
	MaxConcurrentRooms = 64
	// MaxInvocationTimeoutSeconds bounds runtime.invocation_timeout_seconds.
	MaxInvocationTimeoutSeconds = 3_600
	// MaxShutdownGraceSeconds bounds runtime.shutdown_grace_seconds.
	MaxShutdownGraceSeconds = 300
	// MaxRoomQueueLimit bounds runtime.room_queue_limit: every queued
	// invocation keeps its message (up to 64 KiB) in memory and on disk.
	MaxRoomQueueLimit = 1_000
	// MaxSenderRateLimit bounds runtime.sender_rate_limit.
	MaxSenderRateLimit = 1_000
	// MaxSenderRateWindowSeconds bounds runtime.sender_rate_window_seconds.
	MaxSenderRateWindowSeconds = 86_400
	// MaxWaitReactionSeconds bounds runtime.wait_reaction_seconds.
	MaxWaitReactionSeconds = 3_600
	// MaxWaitReactionChars bounds runtime.wait_reaction (one emoji, maybe
	// with modifiers).
	MaxWaitReactionChars = 16
	// MaxUnixSocketPathBytes is the longest path a Unix domain socket can
	// be bound to on Linux: sun_path holds 108 bytes including the
	// terminating NUL. runtime.admin_socket is checked against it.
	MaxUnixSocketPathBytes = 107
	// MaxPathBytes bounds every configured filesystem path.
	MaxPathBytes = 4_096
)

// Values of llm.text_tool_calls.
const (
	// TextToolCallsAuto runs tool calls written into the model's text
	// until the LLM server has answered with a native tool call; from then
	// on, for the life of the process, it does not (the server parses
	// calls itself, so markup in the text is quoted, not issued).
	TextToolCallsAuto = "auto"
	// TextToolCallsAlways runs them even after native tool calls.
	TextToolCallsAlways = "always"
	// TextToolCallsNever does not run them.
	TextToolCallsNever = "never"
)
