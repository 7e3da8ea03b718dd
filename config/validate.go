package config

import (
	"math"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Validate checks c against every rule and returns nil or a [Problems]
// error listing each problem with its exact key. It is pure: it touches
// neither the filesystem nor the environment, so it says nothing about
// whether env: references resolve or the persona file exists; [Resolve]
// checks those. Derived defaults ([Config.WithDefaults]) are applied before
// checking, so an empty runtime.admin_socket is checked as the path it will
// become.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var ps Problems
	c.Matrix.validate(&ps)
	c.LLM.validate(&ps)
	c.Persona.validate(&ps)
	c.Context.validate(&ps)
	c.Search.validate(&ps)
	c.Web.validate(&ps)
	c.Runtime.validate(&ps)
	c.validateConsistency(&ps)
	return ps.sorted().Err()
}

func (m MatrixConfig) validate(ps *Problems) {
	if _, msg := httpURLProblem(m.HomeserverURL); msg != "" {
		ps.add("matrix.homeserver_url", "%s", msg)
	}
	if msg := userIDProblem(m.UserID); msg != "" {
		ps.add("matrix.user_id", "%s", msg)
	}
	switch {
	case m.DeviceID == "":
		ps.add("matrix.device_id", "is required (the device ID the access token was issued for)")
	case len(m.DeviceID) > MaxDeviceIDBytes:
		ps.add("matrix.device_id", "is longer than %d bytes", MaxDeviceIDBytes)
	case strings.IndexFunc(m.DeviceID, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		ps.add("matrix.device_id", "must not contain whitespace or control characters")
	}
	if msg := secretRefProblem(m.AccessToken, true); msg != "" {
		ps.add("matrix.access_token", "%s", msg)
	}
	validateRooms(ps, m.AllowedRoomIDs)
	validateAliases(ps, m.MentionAliases)
	checkRange(ps, "matrix.sync_timeout_ms", m.SyncTimeoutMS, MinSyncTimeoutMS, MaxSyncTimeoutMS)
	checkRange(ps, "matrix.sync_timeline_limit", m.SyncTimelineLimit, 1, MaxSyncTimelineLimit)
	checkRange(ps, "matrix.gap_page_limit", m.GapPageLimit, 1, MaxGapPageLimit)
	checkRange(ps, "matrix.late_store_seconds", m.LateStoreSeconds, 0, MaxLateStoreSeconds)
	switch m.TxnIDsSurviveRestart {
	case "auto", "yes", "no":
	default:
		ps.add("matrix.txn_ids_survive_restart", `must be "auto", "yes" or "no"`)
	}
}

func validateRooms(ps *Problems, rooms []string) {
	const key = "matrix.allowed_room_ids"
	switch {
	case len(rooms) == 0:
		ps.add(key, "must list at least one room ID; Lisa only answers in allowed rooms")
		return
	case len(rooms) > MaxAllowedRooms:
		ps.add(key, "lists %d rooms; at most %d are allowed", len(rooms), MaxAllowedRooms)
	}
	first := make(map[string]int, len(rooms))
	for i, id := range rooms {
		if msg := roomIDProblem(id); msg != "" {
			ps.add(indexed(key, i), "%s", msg)
			continue
		}
		if j, dup := first[id]; dup {
			ps.add(indexed(key, i), "duplicates %s", indexed(key, j))
			continue
		}
		first[id] = i
	}
}

func validateAliases(ps *Problems, aliases []string) {
	const key = "matrix.mention_aliases"
	switch {
	case len(aliases) == 0:
		ps.add(key, "must list at least one name people use to address Lisa")
		return
	case len(aliases) > MaxMentionAliases:
		ps.add(key, "lists %d aliases; at most %d are allowed", len(aliases), MaxMentionAliases)
	}
	for i, a := range aliases {
		k := indexed(key, i)
		if msg := textProblem(a, MaxMentionAliasChars, false); msg != "" {
			ps.add(k, "%s", msg)
			continue
		}
		if strings.TrimSpace(a) != a {
			ps.add(k, "must not start or end with whitespace")
			continue
		}
		for j := range i {
			if strings.EqualFold(aliases[j], a) {
				ps.add(k, "duplicates %s (aliases are compared without regard to case)", indexed(key, j))
				break
			}
		}
	}
}

func (l LLMConfig) validate(ps *Problems) {
	if u, msg := httpURLProblem(l.BaseURL); msg != "" {
		ps.add("llm.base_url", "%s", msg)
	} else if !strings.HasSuffix(u.Path, "/v1") {
		ps.add("llm.base_url", "must end in /v1, the root of the OpenAI-compatible API (no trailing slash)")
	}
	if msg := secretRefProblem(l.APIKey, false); msg != "" {
		ps.add("llm.api_key", "%s", msg)
	}
	if msg := textProblem(l.Model, MaxModelNameChars, false); msg != "" {
		ps.add("llm.model", "%s", msg)
	}
	checkRange(ps, "llm.request_timeout_seconds", l.RequestTimeoutSeconds, 1, MaxLLMRequestTimeoutSeconds)
	checkRange(ps, "llm.max_output_tokens", l.MaxOutputTokens, 1, MaxOutputTokens)
	checkRange(ps, "llm.max_request_characters", l.MaxRequestCharacters, 1, MaxRequestCharacters)
	checkRange(ps, "llm.max_response_characters", l.MaxResponseCharacters, 1, MaxResponseCharacters)
	if l.MaxIterations >= 1 && l.MaxIterations < MinIterations {
		ps.add("llm.max_iterations", "must be at least %d: every LLM request counts, so a tool call needs one request to make it and one to answer", MinIterations)
	} else {
		checkRange(ps, "llm.max_iterations", l.MaxIterations, MinIterations, MaxIterations)
	}
	checkRange(ps, "llm.max_tool_calls", l.MaxToolCalls, 1, MaxToolCalls)
	checkRange(ps, "llm.max_parallel_tool_calls", l.MaxParallelToolCalls, 1, MaxParallelToolCalls)
	if t := l.Temperature; t != nil && (math.IsNaN(*t) || *t < 0 || *t > MaxTemperature) {
		ps.add("llm.temperature", "must be between 0 and %g, or left out to send none", MaxTemperature)
	}
	if l.TokenLimitParameter != "max_tokens" && l.TokenLimitParameter != "max_completion_tokens" {
		ps.add("llm.token_limit_parameter", `must be "max_tokens" or "max_completion_tokens"`)
	}
	switch l.TextToolCalls {
	case TextToolCallsAuto, TextToolCallsAlways, TextToolCallsNever:
	default:
		ps.add("llm.text_tool_calls", `must be "auto", "always" or "never"`)
	}
	switch l.ResponseFormat {
	case "json_schema", "json_object", "none":
	default:
		ps.add("llm.response_format", `must be "json_schema", "json_object" or "none"`)
	}
	checkRange(ps, "llm.context_window_tokens", l.ContextWindowTokens, MinContextWindowTokens, MaxContextWindowTokens)
	if inRange(l.ContextWindowTokens, MinContextWindowTokens, MaxContextWindowTokens) && inRange(l.MaxOutputTokens, 1, MaxOutputTokens) &&
		l.MaxOutputTokens >= l.ContextWindowTokens {
		ps.add("llm.max_output_tokens", "must be less than llm.context_window_tokens (%d): the window holds the request and the answer; got %d", l.ContextWindowTokens, l.MaxOutputTokens)
	}
	checkRange(ps, "llm.daily_token_budget", l.DailyTokenBudget, 0, MaxTokenBudget)
	checkRange(ps, "llm.room_daily_token_budget", l.RoomDailyTokenBudget, 0, MaxTokenBudget)
}

func (p PersonaConfig) validate(ps *Problems) {
	if msg := pathProblem(p.Path); msg != "" {
		ps.add("persona.path", "%s", msg)
	}
	if msg := textProblem(p.GenericError, MaxErrorMessageChars, true); msg != "" {
		ps.add("persona.generic_error", "%s", msg)
	}
	if msg := textProblem(p.OverloadError, MaxErrorMessageChars, true); msg != "" {
		ps.add("persona.overload_error", "%s", msg)
	}
	if msg := textProblem(p.BudgetError, MaxErrorMessageChars, true); msg != "" {
		ps.add("persona.budget_error", "%s", msg)
	}
	if _, err := time.LoadLocation(p.TimeZone); err != nil || p.TimeZone == "" || p.TimeZone == "Local" {
		ps.add("persona.time_zone", "must be an IANA time zone name such as \"UTC\" or \"Europe/Berlin\"")
	}
}

func (c ContextConfig) validate(ps *Problems) {
	checkRange(ps, "context.max_events", c.MaxEvents, 1, MaxContextEvents)
	checkRange(ps, "context.max_characters", c.MaxCharacters, 1, MaxContextCharacters)
	checkRange(ps, "context.max_event_characters", c.MaxEventCharacters, 1, MaxEventCharacters)
	checkRange(ps, "context.max_reply_depth", c.MaxReplyDepth, 1, MaxReplyDepth)
	// A step beyond max_events acts as max_events (roomctx clamps it), so
	// lowering max_events alone never makes a configuration invalid.
	checkRange(ps, "context.window_step_events", c.WindowStepEvents, 1, MaxContextEvents)
}

func (s SearchConfig) validate(ps *Problems) {
	if s.Endpoint != "" {
		if _, msg := httpURLProblem(s.Endpoint); msg != "" {
			ps.add("search.endpoint", "%s", msg)
		}
	} else if !s.APIKey.IsZero() {
		ps.add("search.api_key", "is set but search.endpoint is empty; set the endpoint or remove the key (an empty endpoint disables web_search)")
	}
	if msg := secretRefProblem(s.APIKey, false); msg != "" {
		ps.add("search.api_key", "%s", msg)
	}
	checkRange(ps, "search.max_results", s.MaxResults, 1, MaxSearchResults)
	checkRange(ps, "search.timeout_seconds", s.TimeoutSeconds, 1, MaxSearchTimeoutSeconds)
}

func (w WebConfig) validate(ps *Problems) {
	checkRange(ps, "web.connect_timeout_seconds", w.ConnectTimeoutSeconds, 1, MaxConnectTimeoutSeconds)
	checkRange(ps, "web.read_timeout_seconds", w.ReadTimeoutSeconds, 1, MaxReadTimeoutSeconds)
	checkRange(ps, "web.total_timeout_seconds", w.TotalTimeoutSeconds, 1, MaxTotalTimeoutSeconds)
	checkRange(ps, "web.max_redirects", w.MaxRedirects, 1, MaxRedirects)
	checkRange(ps, "web.max_download_bytes", w.MaxDownloadBytes, 1, MaxDownloadBytes)
	checkRange(ps, "web.max_tool_output_characters", w.MaxToolOutputCharacters, 1, MaxToolOutputCharacters)
	checkRange(ps, "web.max_total_artifact_bytes", w.MaxTotalArtifactBytes, 1, MaxTotalArtifactBytes)
	checkRange(ps, "web.pandoc_timeout_seconds", w.PandocTimeoutSeconds, 1, MaxPandocTimeoutSeconds)
	switch w.Converter {
	case ConverterPandoc, ConverterBuiltin:
	default:
		ps.add("web.converter", "must be %q or %q", ConverterPandoc, ConverterBuiltin)
	}
	if msg := textProblem(w.UserAgent, MaxUserAgentChars, false); msg != "" {
		ps.add("web.user_agent", "%s", msg)
	}
}

func (r RuntimeConfig) validate(ps *Problems) {
	if msg := pathProblem(r.DataDir); msg != "" {
		ps.add("runtime.data_dir", "%s", msg)
	}
	checkRange(ps, "runtime.max_concurrent_rooms", r.MaxConcurrentRooms, 1, MaxConcurrentRooms)
	checkRange(ps, "runtime.invocation_timeout_seconds", r.InvocationTimeoutSeconds, 1, MaxInvocationTimeoutSeconds)
	checkRange(ps, "runtime.shutdown_grace_seconds", r.ShutdownGraceSeconds, 1, MaxShutdownGraceSeconds)
	checkRange(ps, "runtime.room_queue_limit", r.RoomQueueLimit, 1, MaxRoomQueueLimit)
	checkRange(ps, "runtime.sender_rate_limit", r.SenderRateLimit, 0, MaxSenderRateLimit)
	checkRange(ps, "runtime.sender_rate_window_seconds", r.SenderRateWindowSeconds, 1, MaxSenderRateWindowSeconds)
	checkRange(ps, "runtime.wait_reaction_seconds", r.WaitReactionSeconds, 1, MaxWaitReactionSeconds)
	if r.WaitReaction != "" {
		if msg := textProblem(r.WaitReaction, MaxWaitReactionChars, false); msg != "" {
			ps.add("runtime.wait_reaction", "%s", msg)
		}
	}
	switch strings.ToLower(r.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		ps.add("runtime.log_level", "must be one of debug, info, warn, error")
	}
	if msg := metricsListenProblem(r.MetricsListen); msg != "" {
		ps.add("runtime.metrics_listen", "%s", msg)
	}
	checkRange(ps, "runtime.trail_events", r.TrailEvents, 1, MaxTrailEvents)
	if !inRange(r.RetentionDays, MinRetentionDays, MaxRetentionDays) {
		ps.add("runtime.retention_days", "must be between %d and %d days, got %d: routed markers, usage records and budget notices are kept that long, and a message older than that is never answered (the default %d keeps a year of lisa usage)",
			MinRetentionDays, MaxRetentionDays, r.RetentionDays, DefaultRetentionDays)
	}
	if msg := statusListenProblem(r.StatusListen, r.StatusAllowRemote); msg != "" {
		ps.add("runtime.status_listen", "%s", msg)
	}
	if msg := secretRefProblem(r.StatusToken, r.StatusAllowRemote && r.StatusListen != ""); msg != "" {
		ps.add("runtime.status_token", "%s", msg)
	}
	if r.DataDir != "" { // otherwise the socket default is unknown; data_dir is reported
		if msg := socketPathProblem(r.AdminSocket); msg != "" {
			ps.add("runtime.admin_socket", "%s", msg)
		}
	}
}

// validateConsistency checks rules that tie keys together. A rule is only
// checked when each of its keys is within its own range, so one bad value
// is reported once.
func (c Config) validateConsistency(ps *Problems) {
	ctx, llm, web, rt := c.Context, c.LLM, c.Web, c.Runtime
	if inRange(ctx.MaxEventCharacters, 1, MaxEventCharacters) && inRange(ctx.MaxCharacters, 1, MaxContextCharacters) &&
		ctx.MaxEventCharacters > ctx.MaxCharacters {
		ps.add("context.max_event_characters", "must not exceed context.max_characters (%d), got %d", ctx.MaxCharacters, ctx.MaxEventCharacters)
	}
	if inRange(ctx.MaxCharacters, 1, MaxContextCharacters) && inRange(llm.MaxRequestCharacters, 1, MaxRequestCharacters) &&
		ctx.MaxCharacters >= llm.MaxRequestCharacters {
		ps.add("context.max_characters", "must be less than llm.max_request_characters (%d), which also has to hold the prompts and tool results; got %d", llm.MaxRequestCharacters, ctx.MaxCharacters)
	}
	if inRange(web.MaxToolOutputCharacters, 1, MaxToolOutputCharacters) && inRange(llm.MaxRequestCharacters, 1, MaxRequestCharacters) &&
		web.MaxToolOutputCharacters >= llm.MaxRequestCharacters {
		ps.add("web.max_tool_output_characters", "must be less than llm.max_request_characters (%d), or a single tool result could never be sent; got %d", llm.MaxRequestCharacters, web.MaxToolOutputCharacters)
	}
	total := web.TotalTimeoutSeconds
	if inRange(total, 1, MaxTotalTimeoutSeconds) {
		if inRange(web.ConnectTimeoutSeconds, 1, MaxConnectTimeoutSeconds) && web.ConnectTimeoutSeconds > total {
			ps.add("web.connect_timeout_seconds", "must not exceed web.total_timeout_seconds (%d), got %d", total, web.ConnectTimeoutSeconds)
		}
		if inRange(web.ReadTimeoutSeconds, 1, MaxReadTimeoutSeconds) && web.ReadTimeoutSeconds > total {
			ps.add("web.read_timeout_seconds", "must not exceed web.total_timeout_seconds (%d), got %d", total, web.ReadTimeoutSeconds)
		}
	}
	if inRange(web.MaxDownloadBytes, 1, MaxDownloadBytes) && inRange(web.MaxTotalArtifactBytes, 1, MaxTotalArtifactBytes) &&
		web.MaxDownloadBytes > web.MaxTotalArtifactBytes {
		ps.add("web.max_download_bytes", "must not exceed web.max_total_artifact_bytes (%d), or no download could be kept; got %d", web.MaxTotalArtifactBytes, web.MaxDownloadBytes)
	}
	inv := rt.InvocationTimeoutSeconds
	if !inRange(inv, 1, MaxInvocationTimeoutSeconds) {
		return
	}
	for _, part := range []struct {
		key      string
		v, limit int
	}{
		{"llm.request_timeout_seconds", llm.RequestTimeoutSeconds, MaxLLMRequestTimeoutSeconds},
		{"web.total_timeout_seconds", web.TotalTimeoutSeconds, MaxTotalTimeoutSeconds},
		{"web.pandoc_timeout_seconds", web.PandocTimeoutSeconds, MaxPandocTimeoutSeconds},
		{"search.timeout_seconds", c.Search.TimeoutSeconds, MaxSearchTimeoutSeconds},
	} {
		if inRange(part.v, 1, part.limit) && part.v > inv {
			ps.add("runtime.invocation_timeout_seconds", "must be at least %s (%d), since one invocation includes such a request; got %d", part.key, part.v, inv)
		}
	}
}

// checkRange reports v outside lo..hi.
func checkRange(ps *Problems, key string, v, lo, hi int) {
	if !inRange(v, lo, hi) {
		ps.add(key, "must be between %d and %d, got %d", lo, hi, v)
	}
}

func inRange(v, lo, hi int) bool { return lo <= v && v <= hi }

// httpURLProblem parses raw as an absolute http or https URL with a host
// and without credentials, query or fragment. The message never repeats
// the URL, which could carry a password.
func httpURLProblem(raw string) (*url.URL, string) {
	if raw == "" {
		return nil, "is required (an absolute http:// or https:// URL)"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "is not a valid URL"
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, "must be an absolute URL using http or https"
	case u.User != nil:
		return nil, "must not contain credentials (user:password@); use the api_key setting instead"
	case u.Host == "" || u.Hostname() == "":
		return nil, "must be an absolute URL with a host"
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, "must not contain a query or fragment"
	}
	return u, ""
}

// textProblem checks a required piece of configured text: non-blank, at
// most maxChars characters, valid UTF-8 and free of control characters
// (newlines and tabs are allowed when multiline is set).
func textProblem(s string, maxChars int, multiline bool) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "must not be empty"
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case utf8.RuneCountInString(s) > maxChars:
		return "is longer than the limit of " + itoa(maxChars) + " characters"
	}
	for _, r := range s {
		if unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\t' || r == '\r')) {
			return "must not contain control characters"
		}
	}
	return ""
}

// pathProblem checks a required filesystem path.
func pathProblem(p string) string {
	switch {
	case p == "":
		return "is required"
	case strings.IndexByte(p, 0) >= 0:
		return "must not contain a NUL byte"
	case len(p) > MaxPathBytes:
		return "is longer than " + itoa(MaxPathBytes) + " bytes"
	}
	return ""
}

// socketPathProblem checks a Unix socket path. Resolve checks the length
// again once a relative path has been made absolute.
func socketPathProblem(p string) string {
	if msg := pathProblem(p); msg != "" {
		return msg
	}
	if len(p) > MaxUnixSocketPathBytes {
		return "is " + itoa(len(p)) + " bytes long, but a Unix socket path can have at most " + itoa(MaxUnixSocketPathBytes) + " bytes; choose a shorter path (it defaults to runtime.data_dir/" + AdminSocketName + ")"
	}
	return ""
}

// secretRefProblem checks a secret reference. It is shared by Validate and
// Resolve so both report the same text. It never repeats the configured
// value, which may be a pasted secret.
func secretRefProblem(ref SecretRef, required bool) string {
	raw := ref.raw()
	if raw == "" {
		if required {
			return "is required; write env:NAME and put the secret in the environment variable NAME"
		}
		return ""
	}
	name, isRef := strings.CutPrefix(raw, EnvPrefix)
	if !isRef {
		return "holds a literal value, which is not accepted for secrets; write env:NAME and put the secret in the environment variable NAME (the value is not shown)"
	}
	if !validEnvName(name) {
		return "has an invalid variable name after env: (use letters, digits and underscores, not starting with a digit)"
	}
	return ""
}

// MaxTrailEvents bounds runtime.trail_events.
const MaxTrailEvents = 10_000

// runtime.retention_days: the default keeps a year of `lisa usage` (it
// reads up to 366 days); the minimum stays far above every window in
// which an event can be delivered again (Dendrite's JetStream redelivers
// after 5 min 10 s, matrix.late_store_seconds is at most an hour) and
// lets Lisa answer what was asked during a week's downtime.
const (
	// DefaultRetentionDays is runtime.retention_days' default.
	DefaultRetentionDays = 400
	// MinRetentionDays bounds runtime.retention_days from below.
	MinRetentionDays = 7
	// MaxRetentionDays bounds runtime.retention_days from above.
	MaxRetentionDays = 3_650
)

// statusListenProblem checks runtime.status_listen: empty (off), a
// loopback host:port, or any host:port when remote is allowed (the token
// is checked apart). The page shows user IDs and activity; it is never
// served beyond this machine by accident.
func statusListenProblem(addr string, remote bool) string {
	if addr == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "must be host:port, such as 127.0.0.1:8088"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "has an invalid port"
	}
	if host == "localhost" {
		return ""
	}
	ip, err := netip.ParseAddr(host)
	if err == nil && ip.Unmap().IsLoopback() {
		return ""
	}
	if remote {
		if err != nil && host != "" {
			return "must be an IP address (or empty, for every address) and port"
		}
		return ""
	}
	return "must be a loopback address (127.0.0.1, [::1] or localhost); to serve the status page beyond this machine set runtime.status_allow_remote = true and runtime.status_token = \"env:NAME\""
}

// metricsListenProblem checks runtime.metrics_listen: empty (off) or a
// loopback host:port. Metrics reveal activity patterns; they are never
// served beyond this machine.
func metricsListenProblem(addr string) string {
	if addr == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "must be host:port on a loopback address, such as 127.0.0.1:9464"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "has an invalid port"
	}
	if host == "localhost" {
		return ""
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.Unmap().IsLoopback() {
		return "must be a loopback address (127.0.0.1, [::1] or localhost): metrics are never served beyond this machine"
	}
	return ""
}
