package config

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestValidateAcceptsValidConfig(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("valid config rejected:\n%v", err)
	}
}

func TestDefaultNeedsOperatorFields(t *testing.T) {
	ps := problemsOf(t, Default().Validate())
	for _, key := range []string{
		"matrix.homeserver_url", "matrix.user_id", "matrix.device_id", "matrix.access_token",
		"matrix.allowed_room_ids", "matrix.mention_aliases", "llm.base_url", "llm.model",
		"persona.path", "runtime.data_dir",
	} {
		wantProblem(t, ps, key)
	}
	if len(ps) != 10 {
		t.Errorf("Default() has %d problems, want exactly the 10 operator fields:\n%v", len(ps), ps)
	}
}

// TestValidateRules has at least one failing row per validation rule. Each
// row changes validConfig and names the key that must be reported.
func TestValidateRules(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name   string
		mutate func(*Config)
		key    string // "" means the change is valid
		want   string // fragment of the message
	}{
		// URLs.
		{"homeserver missing", func(c *Config) { c.Matrix.HomeserverURL = "" }, "matrix.homeserver_url", "required"},
		{"homeserver relative", func(c *Config) { c.Matrix.HomeserverURL = "matrix.example.org" }, "matrix.homeserver_url", "http"},
		{"homeserver ftp", func(c *Config) { c.Matrix.HomeserverURL = "ftp://example.org" }, "matrix.homeserver_url", "http or https"},
		{"homeserver no host", func(c *Config) { c.Matrix.HomeserverURL = "https://" }, "matrix.homeserver_url", "host"},
		{"homeserver port only", func(c *Config) { c.Matrix.HomeserverURL = "https://:8448" }, "matrix.homeserver_url", "host"},
		{"homeserver credentials", func(c *Config) { c.Matrix.HomeserverURL = "https://u:p@example.org" }, "matrix.homeserver_url", "credentials"},
		{"homeserver query", func(c *Config) { c.Matrix.HomeserverURL = "https://example.org/?x=1" }, "matrix.homeserver_url", "query"},
		{"homeserver fragment", func(c *Config) { c.Matrix.HomeserverURL = "https://example.org/#x" }, "matrix.homeserver_url", "fragment"},
		{"homeserver unparsable", func(c *Config) { c.Matrix.HomeserverURL = "http://[::1" }, "matrix.homeserver_url", "not a valid URL"},
		{"homeserver http with port and path ok", func(c *Config) { c.Matrix.HomeserverURL = "http://localhost:8008/base" }, "", ""},
		{"llm url missing", func(c *Config) { c.LLM.BaseURL = "" }, "llm.base_url", "required"},
		{"llm url without v1", func(c *Config) { c.LLM.BaseURL = "http://127.0.0.1:8000" }, "llm.base_url", "/v1"},
		{"llm url trailing slash", func(c *Config) { c.LLM.BaseURL = "http://127.0.0.1:8000/v1/" }, "llm.base_url", "trailing slash"},
		{"llm url v1 under prefix ok", func(c *Config) { c.LLM.BaseURL = "https://llm.example.org/openai/v1" }, "", ""},
		{"search endpoint bad", func(c *Config) { c.Search.Endpoint = "search.example.org" }, "search.endpoint", "http"},
		{"search endpoint with query", func(c *Config) { c.Search.Endpoint = "https://s.example.org/search?format=json" }, "search.endpoint", "query"},
		{"search disabled ok", func(c *Config) { c.Search.Endpoint = "" }, "", ""},
		{"search enabled ok", func(c *Config) { c.Search.Endpoint = "https://s.example.org/search" }, "", ""},
		{"search key without endpoint", func(c *Config) { c.Search.APIKey = EnvRef("K") }, "search.api_key", "endpoint is empty"},

		// Matrix identifiers.
		{"user id missing", func(c *Config) { c.Matrix.UserID = "" }, "matrix.user_id", "required"},
		{"user id no sigil", func(c *Config) { c.Matrix.UserID = "lisa:example.org" }, "matrix.user_id", "@localpart:server"},
		{"user id no server", func(c *Config) { c.Matrix.UserID = "@lisa" }, "matrix.user_id", "missing"},
		{"user id upper case", func(c *Config) { c.Matrix.UserID = "@Lisa:example.org" }, "matrix.user_id", "localpart"},
		{"user id bad server", func(c *Config) { c.Matrix.UserID = "@lisa:exa_mple.org" }, "matrix.user_id", "server name"},
		{"user id ipv6 server ok", func(c *Config) { c.Matrix.UserID = "@lisa:[::1]:8448" }, "", ""},
		{"device id missing", func(c *Config) { c.Matrix.DeviceID = "" }, "matrix.device_id", "required"},
		{"device id whitespace", func(c *Config) { c.Matrix.DeviceID = "LISA BOT" }, "matrix.device_id", "whitespace"},
		{"device id too long", func(c *Config) { c.Matrix.DeviceID = long(MaxDeviceIDBytes + 1) }, "matrix.device_id", "longer"},
		{"rooms empty", func(c *Config) { c.Matrix.AllowedRoomIDs = nil }, "matrix.allowed_room_ids", "at least one"},
		{"rooms too many", func(c *Config) {
			c.Matrix.AllowedRoomIDs = nil
			for i := range MaxAllowedRooms + 1 {
				c.Matrix.AllowedRoomIDs = append(c.Matrix.AllowedRoomIDs, "!r"+strings.Repeat("x", i)+":example.org")
			}
		}, "matrix.allowed_room_ids", "at most"},
		{"room alias", func(c *Config) { c.Matrix.AllowedRoomIDs = []string{"!a:example.org", "#room:example.org"} }, "matrix.allowed_room_ids[1]", "repointed"},
		{"room user id", func(c *Config) { c.Matrix.AllowedRoomIDs = []string{"@a:example.org"} }, "matrix.allowed_room_ids[0]", "!opaque:server"},
		{"room without server", func(c *Config) { c.Matrix.AllowedRoomIDs = []string{"!abc"} }, "matrix.allowed_room_ids[0]", "missing"},
		{"room empty", func(c *Config) { c.Matrix.AllowedRoomIDs = []string{""} }, "matrix.allowed_room_ids[0]", "empty"},
		{"room duplicate", func(c *Config) {
			c.Matrix.AllowedRoomIDs = []string{"!a:example.org", "!b:example.org", "!a:example.org"}
		}, "matrix.allowed_room_ids[2]", "duplicates matrix.allowed_room_ids[0]"},
		{"room ids are case sensitive", func(c *Config) { c.Matrix.AllowedRoomIDs = []string{"!a:example.org", "!A:example.org"} }, "", ""},
		{"aliases empty", func(c *Config) { c.Matrix.MentionAliases = []string{} }, "matrix.mention_aliases", "at least one"},
		{"alias blank", func(c *Config) { c.Matrix.MentionAliases = []string{"Lisa", "  "} }, "matrix.mention_aliases[1]", "empty"},
		{"alias padded", func(c *Config) { c.Matrix.MentionAliases = []string{" Lisa"} }, "matrix.mention_aliases[0]", "whitespace"},
		{"alias too long", func(c *Config) { c.Matrix.MentionAliases = []string{long(MaxMentionAliasChars + 1)} }, "matrix.mention_aliases[0]", "longer"},
		{"alias control", func(c *Config) { c.Matrix.MentionAliases = []string{"Li\nsa"} }, "matrix.mention_aliases[0]", "control"},
		{"alias duplicate folded", func(c *Config) { c.Matrix.MentionAliases = []string{"Lisa", "@Lisa", "LISA"} }, "matrix.mention_aliases[2]", "duplicates matrix.mention_aliases[0]"},
		{"aliases too many", func(c *Config) {
			c.Matrix.MentionAliases = nil
			for i := range MaxMentionAliases + 1 {
				c.Matrix.MentionAliases = append(c.Matrix.MentionAliases, "n"+strings.Repeat("x", i))
			}
		}, "matrix.mention_aliases", "at most"},

		// Secrets.
		{"access token missing", func(c *Config) { c.Matrix.AccessToken = SecretRef{} }, "matrix.access_token", "required"},
		{"access token literal", func(c *Config) { c.Matrix.AccessToken = NewSecretRef("syt_abc") }, "matrix.access_token", "env:NAME"},
		{"access token bad env name", func(c *Config) { c.Matrix.AccessToken = NewSecretRef("env:1ABC") }, "matrix.access_token", "variable name"},
		{"access token empty env name", func(c *Config) { c.Matrix.AccessToken = NewSecretRef("env:") }, "matrix.access_token", "variable name"},
		{"llm key literal", func(c *Config) { c.LLM.APIKey = NewSecretRef("sk-abc") }, "llm.api_key", "env:NAME"},
		{"llm key empty ok", func(c *Config) { c.LLM.APIKey = SecretRef{} }, "", ""},
		{"llm key env ok", func(c *Config) { c.LLM.APIKey = EnvRef("_Key_2") }, "", ""},
		{"search key literal", func(c *Config) {
			c.Search.Endpoint = "https://s.example.org/search"
			c.Search.APIKey = NewSecretRef("abc")
		}, "search.api_key", "literal"},

		// Text.
		{"model empty", func(c *Config) { c.LLM.Model = " " }, "llm.model", "empty"},
		{"model too long", func(c *Config) { c.LLM.Model = long(MaxModelNameChars + 1) }, "llm.model", "longer"},
		{"persona path empty", func(c *Config) { c.Persona.Path = "" }, "persona.path", "required"},
		{"persona path nul", func(c *Config) { c.Persona.Path = "a\x00b" }, "persona.path", "NUL"},
		{"generic error empty", func(c *Config) { c.Persona.GenericError = "" }, "persona.generic_error", "empty"},
		{"generic error too long", func(c *Config) { c.Persona.GenericError = long(MaxErrorMessageChars + 1) }, "persona.generic_error", "longer"},
		{"generic error multiline ok", func(c *Config) { c.Persona.GenericError = "Oops.\nTry again." }, "", ""},
		{"overload error empty", func(c *Config) { c.Persona.OverloadError = "\n" }, "persona.overload_error", "empty"},
		{"overload error control", func(c *Config) { c.Persona.OverloadError = "a\x07b" }, "persona.overload_error", "control"},
		{"user agent empty", func(c *Config) { c.Web.UserAgent = "" }, "web.user_agent", "empty"},
		{"user agent control", func(c *Config) { c.Web.UserAgent = "Lisa\r\nX-Evil: 1" }, "web.user_agent", "control"},
		{"user agent too long", func(c *Config) { c.Web.UserAgent = long(MaxUserAgentChars + 1) }, "web.user_agent", "longer"},
		{"log level unknown", func(c *Config) { c.Runtime.LogLevel = "verbose" }, "runtime.log_level", "debug, info, warn, error"},
		{"log level any case ok", func(c *Config) { c.Runtime.LogLevel = "WARN" }, "", ""},
		{"data dir empty", func(c *Config) { c.Runtime.DataDir = "" }, "runtime.data_dir", "required"},
		{"data dir absolute ok", func(c *Config) { c.Runtime.DataDir = "/var/lib/lisa" }, "", ""},
		{"admin socket too long", func(c *Config) { c.Runtime.AdminSocket = "/" + long(MaxUnixSocketPathBytes) }, "runtime.admin_socket", "107 bytes"},
		{"admin socket default too long", func(c *Config) { c.Runtime.DataDir = "/" + long(100) }, "runtime.admin_socket", "107 bytes"},

		// Numeric ranges and ceilings.
		{"sync timeout zero", func(c *Config) { c.Matrix.SyncTimeoutMS = 0 }, "matrix.sync_timeout_ms", "between"},
		{"sync timeout too low", func(c *Config) { c.Matrix.SyncTimeoutMS = MinSyncTimeoutMS - 1 }, "matrix.sync_timeout_ms", "between"},
		{"sync timeout too high", func(c *Config) { c.Matrix.SyncTimeoutMS = MaxSyncTimeoutMS + 1 }, "matrix.sync_timeout_ms", "between"},
		{"sync timeout at ceiling ok", func(c *Config) { c.Matrix.SyncTimeoutMS = MaxSyncTimeoutMS }, "", ""},
		{"timeline limit zero", func(c *Config) { c.Matrix.SyncTimelineLimit = 0 }, "matrix.sync_timeline_limit", "between"},
		{"timeline limit high", func(c *Config) { c.Matrix.SyncTimelineLimit = MaxSyncTimelineLimit + 1 }, "matrix.sync_timeline_limit", "between"},
		{"gap pages negative", func(c *Config) { c.Matrix.GapPageLimit = -1 }, "matrix.gap_page_limit", "between"},
		{"gap pages high", func(c *Config) { c.Matrix.GapPageLimit = MaxGapPageLimit + 1 }, "matrix.gap_page_limit", "between"},
		{"late store negative", func(c *Config) { c.Matrix.LateStoreSeconds = -1 }, "matrix.late_store_seconds", "between"},
		{"late store high", func(c *Config) { c.Matrix.LateStoreSeconds = MaxLateStoreSeconds + 1 }, "matrix.late_store_seconds", "between"},
		{"txn ids survive unknown", func(c *Config) { c.Matrix.TxnIDsSurviveRestart = "maybe" }, "matrix.txn_ids_survive_restart", `"auto", "yes" or "no"`},
		{"txn ids survive empty", func(c *Config) { c.Matrix.TxnIDsSurviveRestart = "" }, "matrix.txn_ids_survive_restart", `"auto", "yes" or "no"`},
		{"llm timeout zero", func(c *Config) { c.LLM.RequestTimeoutSeconds = 0 }, "llm.request_timeout_seconds", "between"},
		{"llm timeout high", func(c *Config) { c.LLM.RequestTimeoutSeconds = MaxLLMRequestTimeoutSeconds + 1 }, "llm.request_timeout_seconds", "between"},
		{"output tokens zero", func(c *Config) { c.LLM.MaxOutputTokens = 0 }, "llm.max_output_tokens", "between"},
		{"output tokens high", func(c *Config) { c.LLM.MaxOutputTokens = MaxOutputTokens + 1 }, "llm.max_output_tokens", "between"},
		{"request chars zero", func(c *Config) { c.LLM.MaxRequestCharacters = 0 }, "llm.max_request_characters", "between"},
		{"request chars high", func(c *Config) { c.LLM.MaxRequestCharacters = MaxRequestCharacters + 1 }, "llm.max_request_characters", "between"},
		{"response chars zero", func(c *Config) { c.LLM.MaxResponseCharacters = 0 }, "llm.max_response_characters", "between"},
		{"response chars high", func(c *Config) { c.LLM.MaxResponseCharacters = MaxResponseCharacters + 1 }, "llm.max_response_characters", "between"},
		{"iterations zero", func(c *Config) { c.LLM.MaxIterations = 0 }, "llm.max_iterations", "between"},
		{"iterations one", func(c *Config) { c.LLM.MaxIterations = 1 }, "llm.max_iterations", "at least 2"},
		{"iterations million", func(c *Config) { c.LLM.MaxIterations = 1_000_000 }, "llm.max_iterations", "between"},
		{"tool calls zero", func(c *Config) { c.LLM.MaxToolCalls = 0 }, "llm.max_tool_calls", "between"},
		{"tool calls high", func(c *Config) { c.LLM.MaxToolCalls = MaxToolCalls + 1 }, "llm.max_tool_calls", "between"},
		{"parallel tool calls zero", func(c *Config) { c.LLM.MaxParallelToolCalls = 0 }, "llm.max_parallel_tool_calls", "between"},
		{"parallel tool calls high", func(c *Config) { c.LLM.MaxParallelToolCalls = MaxParallelToolCalls + 1 }, "llm.max_parallel_tool_calls", "between"},
		{"temperature negative", func(c *Config) { c.LLM.Temperature = ptrTo(-0.1) }, "llm.temperature", "between 0 and 2"},
		{"temperature high", func(c *Config) { c.LLM.Temperature = ptrTo(2.5) }, "llm.temperature", "between 0 and 2"},
		{"temperature nan", func(c *Config) { c.LLM.Temperature = ptrTo(math.NaN()) }, "llm.temperature", "between 0 and 2"},
		{"temperature zero ok", func(c *Config) { c.LLM.Temperature = ptrTo(0.0) }, "", ""},
		{"temperature unset ok", func(c *Config) { c.LLM.Temperature = nil }, "", ""},
		{"token limit parameter", func(c *Config) { c.LLM.TokenLimitParameter = "max_new_tokens" }, "llm.token_limit_parameter", "max_completion_tokens"},
		{"token limit parameter new name ok", func(c *Config) { c.LLM.TokenLimitParameter = "max_completion_tokens" }, "", ""},
		{"response format", func(c *Config) { c.LLM.ResponseFormat = "json" }, "llm.response_format", "json_schema"},
		{"response format none ok", func(c *Config) { c.LLM.ResponseFormat = "none" }, "", ""},
		{"context window too small", func(c *Config) { c.LLM.ContextWindowTokens = 100 }, "llm.context_window_tokens", "between"},
		{"output fills the window", func(c *Config) { c.LLM.ContextWindowTokens = 1024; c.LLM.MaxOutputTokens = 1024 }, "llm.max_output_tokens", "less than llm.context_window_tokens"},
		{"window step beyond max events is fine", func(c *Config) { c.Context.WindowStepEvents = 41 }, "", ""},
		{"window step too large", func(c *Config) { c.Context.WindowStepEvents = 501 }, "context.window_step_events", "between"},
		{"window step zero", func(c *Config) { c.Context.WindowStepEvents = 0 }, "context.window_step_events", "between"},
		{"context events zero", func(c *Config) { c.Context.MaxEvents = 0 }, "context.max_events", "between"},
		{"context events high", func(c *Config) { c.Context.MaxEvents = MaxContextEvents + 1 }, "context.max_events", "between"},
		{"context chars zero", func(c *Config) { c.Context.MaxCharacters = 0 }, "context.max_characters", "between"},
		{"context chars high", func(c *Config) { c.Context.MaxCharacters = MaxContextCharacters + 1 }, "context.max_characters", "between"},
		{"event chars zero", func(c *Config) { c.Context.MaxEventCharacters = 0 }, "context.max_event_characters", "between"},
		{"event chars high", func(c *Config) { c.Context.MaxEventCharacters = MaxEventCharacters + 1 }, "context.max_event_characters", "between"},
		{"reply depth zero", func(c *Config) { c.Context.MaxReplyDepth = 0 }, "context.max_reply_depth", "between"},
		{"reply depth high", func(c *Config) { c.Context.MaxReplyDepth = MaxReplyDepth + 1 }, "context.max_reply_depth", "between"},
		{"search results zero", func(c *Config) { c.Search.MaxResults = 0 }, "search.max_results", "between"},
		{"search results high", func(c *Config) { c.Search.MaxResults = MaxSearchResults + 1 }, "search.max_results", "between"},
		{"search timeout zero", func(c *Config) { c.Search.TimeoutSeconds = 0 }, "search.timeout_seconds", "between"},
		{"search timeout high", func(c *Config) { c.Search.TimeoutSeconds = MaxSearchTimeoutSeconds + 1 }, "search.timeout_seconds", "between"},
		{"connect timeout zero", func(c *Config) { c.Web.ConnectTimeoutSeconds = 0 }, "web.connect_timeout_seconds", "between"},
		{"connect timeout high", func(c *Config) { c.Web.ConnectTimeoutSeconds = MaxConnectTimeoutSeconds + 1 }, "web.connect_timeout_seconds", "between"},
		{"read timeout zero", func(c *Config) { c.Web.ReadTimeoutSeconds = 0 }, "web.read_timeout_seconds", "between"},
		{"read timeout high", func(c *Config) { c.Web.ReadTimeoutSeconds = MaxReadTimeoutSeconds + 1 }, "web.read_timeout_seconds", "between"},
		{"total timeout zero", func(c *Config) { c.Web.TotalTimeoutSeconds = 0 }, "web.total_timeout_seconds", "between"},
		{"total timeout high", func(c *Config) { c.Web.TotalTimeoutSeconds = MaxTotalTimeoutSeconds + 1 }, "web.total_timeout_seconds", "between"},
		{"redirects zero", func(c *Config) { c.Web.MaxRedirects = 0 }, "web.max_redirects", "between"},
		{"redirects high", func(c *Config) { c.Web.MaxRedirects = MaxRedirects + 1 }, "web.max_redirects", "between"},
		{"download unlimited", func(c *Config) { c.Web.MaxDownloadBytes = 0 }, "web.max_download_bytes", "between"},
		{"download huge", func(c *Config) { c.Web.MaxDownloadBytes = MaxDownloadBytes + 1 }, "web.max_download_bytes", "between"},
		{"tool output zero", func(c *Config) { c.Web.MaxToolOutputCharacters = 0 }, "web.max_tool_output_characters", "between"},
		{"tool output high", func(c *Config) { c.Web.MaxToolOutputCharacters = MaxToolOutputCharacters + 1 }, "web.max_tool_output_characters", "between"},
		{"artifacts zero", func(c *Config) { c.Web.MaxTotalArtifactBytes = 0 }, "web.max_total_artifact_bytes", "between"},
		{"artifacts high", func(c *Config) { c.Web.MaxTotalArtifactBytes = MaxTotalArtifactBytes + 1 }, "web.max_total_artifact_bytes", "between"},
		{"converter unknown", func(c *Config) { c.Web.Converter = "lynx" }, "web.converter", `"pandoc" or "builtin"`},
		{"converter builtin ok", func(c *Config) { c.Web.Converter = ConverterBuiltin }, "", ""},
		{"converter empty", func(c *Config) { c.Web.Converter = "" }, "web.converter", `"pandoc" or "builtin"`},
		{"converter case", func(c *Config) { c.Web.Converter = "Builtin" }, "web.converter", `"pandoc" or "builtin"`},
		{"pandoc timeout zero", func(c *Config) { c.Web.PandocTimeoutSeconds = 0 }, "web.pandoc_timeout_seconds", "between"},
		{"pandoc timeout high", func(c *Config) { c.Web.PandocTimeoutSeconds = MaxPandocTimeoutSeconds + 1 }, "web.pandoc_timeout_seconds", "between"},
		{"rooms concurrency zero", func(c *Config) { c.Runtime.MaxConcurrentRooms = 0 }, "runtime.max_concurrent_rooms", "between"},
		{"rooms concurrency high", func(c *Config) { c.Runtime.MaxConcurrentRooms = MaxConcurrentRooms + 1 }, "runtime.max_concurrent_rooms", "between"},
		{"invocation timeout zero", func(c *Config) { c.Runtime.InvocationTimeoutSeconds = 0 }, "runtime.invocation_timeout_seconds", "between"},
		{"invocation timeout high", func(c *Config) { c.Runtime.InvocationTimeoutSeconds = MaxInvocationTimeoutSeconds + 1 }, "runtime.invocation_timeout_seconds", "between"},
		{"shutdown grace zero", func(c *Config) { c.Runtime.ShutdownGraceSeconds = 0 }, "runtime.shutdown_grace_seconds", "between"},
		{"shutdown grace high", func(c *Config) { c.Runtime.ShutdownGraceSeconds = MaxShutdownGraceSeconds + 1 }, "runtime.shutdown_grace_seconds", "between"},
		{"room queue zero", func(c *Config) { c.Runtime.RoomQueueLimit = 0 }, "runtime.room_queue_limit", "between"},
		{"room queue high", func(c *Config) { c.Runtime.RoomQueueLimit = MaxRoomQueueLimit + 1 }, "runtime.room_queue_limit", "between"},
		{"sender rate negative", func(c *Config) { c.Runtime.SenderRateLimit = -1 }, "runtime.sender_rate_limit", "between"},
		{"sender rate high", func(c *Config) { c.Runtime.SenderRateLimit = MaxSenderRateLimit + 1 }, "runtime.sender_rate_limit", "between"},
		{"sender window zero", func(c *Config) { c.Runtime.SenderRateWindowSeconds = 0 }, "runtime.sender_rate_window_seconds", "between"},
		{"wait reaction zero", func(c *Config) { c.Runtime.WaitReactionSeconds = 0 }, "runtime.wait_reaction_seconds", "between"},
		{"wait reaction high", func(c *Config) { c.Runtime.WaitReactionSeconds = MaxWaitReactionSeconds + 1 }, "runtime.wait_reaction_seconds", "between"},
		{"wait reaction long", func(c *Config) { c.Runtime.WaitReaction = strings.Repeat("⏳", 17) }, "runtime.wait_reaction", "longer"},
		{"wait reaction newline", func(c *Config) { c.Runtime.WaitReaction = "a\nb" }, "runtime.wait_reaction", "control"},
		{"time zone unknown", func(c *Config) { c.Persona.TimeZone = "Mars/Olympus" }, "persona.time_zone", "IANA"},
		{"time zone local", func(c *Config) { c.Persona.TimeZone = "Local" }, "persona.time_zone", "IANA"},
		{"time zone empty", func(c *Config) { c.Persona.TimeZone = "" }, "persona.time_zone", "IANA"},
		{"sender window high", func(c *Config) { c.Runtime.SenderRateWindowSeconds = MaxSenderRateWindowSeconds + 1 }, "runtime.sender_rate_window_seconds", "between"},

		// Consistency between keys.
		{"event chars above context chars", func(c *Config) {
			c.Context.MaxCharacters = 1000
			c.Context.MaxEventCharacters = 1001
		}, "context.max_event_characters", "context.max_characters"},
		{"context chars above request", func(c *Config) {
			c.LLM.MaxRequestCharacters = 20_000
			c.Context.MaxCharacters = 20_000
			c.Web.MaxToolOutputCharacters = 1_000
		}, "context.max_characters", "llm.max_request_characters"},
		{"tool output above request", func(c *Config) {
			c.LLM.MaxRequestCharacters = 30_000
			c.Web.MaxToolOutputCharacters = 30_000
		}, "web.max_tool_output_characters", "llm.max_request_characters"},
		{"connect above total", func(c *Config) { c.Web.ConnectTimeoutSeconds = 21 }, "web.connect_timeout_seconds", "web.total_timeout_seconds"},
		{"read above total", func(c *Config) { c.Web.ReadTimeoutSeconds = 21 }, "web.read_timeout_seconds", "web.total_timeout_seconds"},
		{"read equal total ok", func(c *Config) { c.Web.ReadTimeoutSeconds = 20 }, "", ""},
		{"download above artifacts", func(c *Config) {
			c.Web.MaxDownloadBytes = 9_000_000
		}, "web.max_download_bytes", "web.max_total_artifact_bytes"},
		{"invocation below llm timeout", func(c *Config) { c.Runtime.InvocationTimeoutSeconds = 89 }, "runtime.invocation_timeout_seconds", "llm.request_timeout_seconds"},
		{"invocation below web total", func(c *Config) {
			c.Runtime.InvocationTimeoutSeconds = 100
			c.Web.TotalTimeoutSeconds = 101
		}, "runtime.invocation_timeout_seconds", "web.total_timeout_seconds"},
		{"invocation below search timeout", func(c *Config) {
			c.Runtime.InvocationTimeoutSeconds = 100
			c.Search.TimeoutSeconds = 101
		}, "runtime.invocation_timeout_seconds", "search.timeout_seconds"},
		{"invocation below pandoc timeout", func(c *Config) {
			c.Runtime.InvocationTimeoutSeconds = 100
			c.Web.PandocTimeoutSeconds = 101
		}, "runtime.invocation_timeout_seconds", "web.pandoc_timeout_seconds"},
	}
	keys := Keys()
	seen := map[string]bool{}
	for _, tt := range tests {
		if seen[tt.name] {
			t.Fatalf("duplicate row name %q", tt.name)
		}
		seen[tt.name] = true
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(&c)
			ps := problemsOf(t, c.Validate())
			if tt.key == "" {
				if len(ps) > 0 {
					t.Fatalf("want no problems, got:\n%v", ps)
				}
				return
			}
			if !slices.Contains(keys, baseKey(tt.key)) {
				t.Fatalf("row names key %q, which is not in Keys()", tt.key)
			}
			wantProblem(t, ps, tt.key, tt.want)
		})
	}
}

// TestValidateReportsEveryProblem checks that problems are collected, not
// returned one at a time, and come out in file order.
func TestValidateReportsEveryProblem(t *testing.T) {
	c := validConfig()
	c.Runtime.LogLevel = "loud"
	c.Matrix.AllowedRoomIDs = []string{"#a:example.org", "!b:example.org", "!b:example.org"}
	c.LLM.Model = ""
	c.Web.MaxRedirects = 0
	ps := problemsOf(t, c.Validate())
	var got []string
	for _, p := range ps {
		got = append(got, p.Key)
	}
	want := []string{
		"matrix.allowed_room_ids[0]", "matrix.allowed_room_ids[2]", "llm.model",
		"web.max_redirects", "runtime.log_level",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problem keys = %q, want %q", got, want)
	}
	if !strings.Contains(ps.Error(), "\n") || strings.Count(ps.Error(), "\n") != len(ps)-1 {
		t.Errorf("Error() is not one problem per line:\n%s", ps.Error())
	}
}

func TestValidateIsPure(t *testing.T) {
	// Neither the persona file nor the data directory exists, and no
	// environment variable is set: Validate must not care.
	c := validConfig()
	c.Persona.Path = "/nonexistent/persona.md"
	c.Runtime.DataDir = "/nonexistent/data"
	c.Matrix.AccessToken = EnvRef("LISA_TEST_SURELY_UNSET_VARIABLE")
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate looked outside the struct:\n%v", err)
	}
}

func TestWithDefaults(t *testing.T) {
	c := validConfig()
	c.Runtime.DataDir = "/var/lib/lisa"
	if got := c.WithDefaults().Runtime.AdminSocket; got != "/var/lib/lisa/admin.sock" {
		t.Errorf("default admin socket = %q", got)
	}
	c.Runtime.AdminSocket = "/run/lisa.sock"
	if got := c.WithDefaults().Runtime.AdminSocket; got != "/run/lisa.sock" {
		t.Errorf("explicit admin socket replaced: %q", got)
	}
	c.Runtime.AdminSocket, c.Runtime.DataDir = "", ""
	if got := c.WithDefaults().Runtime.AdminSocket; got != "" {
		t.Errorf("admin socket without data dir = %q, want empty", got)
	}
}

func TestDurationsAndLevels(t *testing.T) {
	c := Default()
	if got := c.Matrix.SyncRequestTimeout(); got != c.Matrix.SyncTimeout()+SyncRequestSlack || got <= c.Matrix.SyncTimeout() {
		t.Errorf("SyncRequestTimeout = %v", got)
	}
	if c.LLM.RequestTimeout().Seconds() != 90 || c.Web.TotalTimeout().Seconds() != 20 ||
		c.Runtime.InvocationTimeout().Seconds() != 180 || c.Search.Timeout().Seconds() != 15 {
		t.Error("duration helpers disagree with the defaults")
	}
	for level, want := range map[string]string{"DEBUG": "DEBUG", "info": "INFO", "Warn": "WARN", "error": "ERROR"} {
		if got := (RuntimeConfig{LogLevel: level}).SlogLevel().String(); got != want {
			t.Errorf("SlogLevel(%q) = %s, want %s", level, got, want)
		}
	}
}

func TestMetricsListen(t *testing.T) {
	for _, c := range []struct {
		addr string
		ok   bool
	}{
		{"", true}, {"127.0.0.1:9464", true}, {"[::1]:9464", true}, {"localhost:9464", true}, {"127.8.9.1:1", true},
		{"0.0.0.0:9464", false}, {"192.168.1.5:9464", false}, {"[::]:9464", false}, {"example.org:9464", false},
		{"127.0.0.1", false}, {"127.0.0.1:0", false}, {"127.0.0.1:99999", false}, {":9464", false},
	} {
		if got := metricsListenProblem(c.addr) == ""; got != c.ok {
			t.Errorf("metrics_listen %q accepted=%v, want %v", c.addr, got, c.ok)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestStatusListen: the status page is loopback only unless remote
// serving is allowed, and then only with a token given as env:NAME.
func TestStatusListen(t *testing.T) {
	for _, c := range []struct {
		name   string
		addr   string
		remote bool
		token  SecretRef
		keys   []string // keys with a problem
	}{
		{"off", "", false, SecretRef{}, nil},
		{"loopback", "127.0.0.1:8088", false, SecretRef{}, nil},
		{"localhost", "localhost:8088", false, SecretRef{}, nil},
		{"v6 loopback", "[::1]:8088", false, SecretRef{}, nil},
		{"remote refused", "0.0.0.0:8088", false, SecretRef{}, []string{"runtime.status_listen"}},
		{"remote without token", "192.168.1.5:8088", true, SecretRef{}, []string{"runtime.status_token"}},
		{"remote with literal token", "192.168.1.5:8088", true, NewSecretRef("hunter2hunter2"), []string{"runtime.status_token"}},
		{"remote with env token", "192.168.1.5:8088", true, EnvRef("LISA_STATUS_TOKEN"), nil},
		{"all addresses with env token", ":8088", true, EnvRef("LISA_STATUS_TOKEN"), nil},
		{"host name", "example.org:8088", true, EnvRef("LISA_STATUS_TOKEN"), []string{"runtime.status_listen"}},
		{"no port", "127.0.0.1", false, SecretRef{}, []string{"runtime.status_listen"}},
	} {
		cfg := validConfig()
		cfg.Runtime.StatusListen, cfg.Runtime.StatusAllowRemote, cfg.Runtime.StatusToken = c.addr, c.remote, c.token
		err := cfg.Validate()
		var got []string
		if ps, ok := err.(Problems); ok {
			for _, p := range ps {
				got = append(got, p.Key)
			}
		} else if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if strings.Join(got, ",") != strings.Join(c.keys, ",") {
			t.Errorf("%s: problems at %v, want %v (%v)", c.name, got, c.keys, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the literal token is repeated: %v", c.name, err)
		}
	}
}
