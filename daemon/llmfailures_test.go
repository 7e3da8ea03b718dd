package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/adapters/llm"
	"github.com/lisabot/lisa/adapters/logging"
	"github.com/lisabot/lisa/adapters/metrics"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// TestLLMFailuresSayWhatIsWrong (issue #32 item 3): each cause of an LLM
// failure, served by the scripted model to the client as the daemon
// builds it (llmClient: the logs' secret redactor, the metrics), is logged
// with Lisa's code, the cause, the HTTP status and the server's own
// message — bounded, and with the secrets it echoes redacted before it is
// cut — at ERROR once per cause with the setting to check when only the
// operator can fix it, at WARN otherwise; counted by cause in
// lisa_llm_failures_total; and, for a refusal of every request, reported
// by health as degraded until a request is answered.
func TestLLMFailuresSayWhatIsWrong(t *testing.T) {
	const (
		key   = "sk-live-0123456789abcdefSECRET"
		token = "syt_matrix_access_token_SECRET"
	)
	cases := []struct {
		name    string
		step    llmfake.Step
		code    messages.Code
		cause   messages.LLMCause
		status  int
		level   string // of the first failure's line
		message string // in server_message
		fix     string // in the ERROR line's fix
		attempt int    // attempts of one request (retries)
		refuses bool   // health degraded
	}{
		{name: "unauthorized", step: llmfake.Error(401, "Incorrect API key provided: "+key+". You can find your API key in your account."),
			code: messages.CodeLLMRejected, cause: messages.CauseUnauthorized, status: 401, level: "ERROR",
			message: "Incorrect API key provided: [REDACTED].", fix: "llm.api_key", attempt: 1, refuses: true},
		{name: "forbidden", step: llmfake.Error(403, "Project does not have access to model m."),
			code: messages.CodeLLMRejected, cause: messages.CauseUnauthorized, status: 403, level: "ERROR",
			message: "does not have access to model m", fix: "llm.api_key", attempt: 1, refuses: true},
		{name: "model not found", step: llmfake.ErrorTyped(404, "invalid_request_error", "model_not_found",
			"The model `gpt-9` does not exist or you do not have access to it."+strings.Repeat(" Check the name.", 14)+" "+key),
			code: messages.CodeLLMRejected, cause: messages.CauseModelNotFound, status: 404, level: "ERROR",
			message: "The model `gpt-9` does not exist", fix: "llm.model", attempt: 1, refuses: true},
		{name: "context too long", step: llmfake.ErrorTyped(400, "invalid_request_error", "context_length_exceeded",
			"This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens."),
			code: messages.CodeLLMRejected, cause: messages.CauseContextTooLong, status: 400, level: "ERROR",
			message: "maximum context length is 8192 tokens", fix: "llm.context_window_tokens", attempt: 1},
		{name: "parameter refused", step: llmfake.ErrorTyped(400, "invalid_request_error", "unsupported_parameter",
			"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."),
			code: messages.CodeLLMRejected, cause: messages.CauseParameterRefused, status: 400, level: "ERROR",
			message: "Unsupported parameter: 'max_tokens'", fix: "llm.token_limit_parameter", attempt: 1, refuses: true},
		{name: "rate limited", step: llmfake.Error(429, "Rate limit reached for requests.").WithHeader("Retry-After", "60"),
			code: messages.CodeLLMUnavailable, cause: messages.CauseRateLimited, status: 429, level: "WARN",
			message: "Rate limit reached", attempt: 1},
		{name: "server error", step: llmfake.Error(500, "The server had an error while processing your request (token "+token+")."),
			code: messages.CodeLLMUnavailable, cause: messages.CauseServerError, status: 500, level: "WARN",
			message: "(token [REDACTED]).", attempt: 3},
		{name: "timeout", step: llmfake.Answer("late").After(10 * time.Second),
			code: messages.CodeLLMTimeout, cause: messages.CauseTimeout, status: 0, level: "WARN", attempt: 1},
		{name: "malformed response", step: llmfake.Truncated(),
			code: messages.CodeLLMBadResponse, cause: messages.CauseMalformed, status: 200, level: "WARN", attempt: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := llmfake.Start(t, llmfake.WithModels("m"))
			cfg := config.Default()
			cfg.LLM.BaseURL, cfg.LLM.Model, cfg.LLM.RequestTimeoutSeconds = srv.URL(), "m", 1
			secrets := []string{key, token}
			var buf bytes.Buffer // the redactor writes one record at a time
			log := logging.New(&buf, slog.LevelInfo, secrets)
			met := metrics.New(metrics.Sources{})
			client := llmClient(cfg, key, logging.NewRedactor(io.Discard, secrets).Redact, met, log)

			// Twice: a cause only the operator can fix is an ERROR once.
			for range 2 {
				srv.Enqueue(repeat(c.step, c.attempt)...)
				ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond+time.Duration(c.attempt-1)*3*time.Second)
				_, err := client.Chat(ctx, messages.ChatRequest{Messages: []messages.ChatMessage{{Role: messages.RoleUser, Content: "hi"}}})
				cancel()
				if messages.ErrorCode(err) != c.code || messages.LLMCauseOf(err) != c.cause {
					t.Fatalf("err = %v (cause %s), want code %s cause %s", err, messages.LLMCauseOf(err), c.code, c.cause)
				}
			}
			out := buf.String()
			if strings.Contains(out, key[:8]) || strings.Contains(out, token[:8]) {
				t.Fatalf("a secret, or a part of one, is in the log:\n%s", out)
			}
			recs := failureLines(t, out)
			if len(recs) != 2*c.attempt {
				t.Fatalf("%d failure lines, want %d:\n%s", len(recs), 2*c.attempt, out)
			}
			errors := 0
			for i, r := range recs {
				if r["code"] != string(c.code) || r["cause"] != string(c.cause) || r["status"] != float64(c.status) {
					t.Errorf("line %d: code %v cause %v status %v", i, r["code"], r["cause"], r["status"])
				}
				msg, _ := r["server_message"].(string)
				if !strings.Contains(msg, c.message) || len(msg) > 300+len("…") {
					t.Errorf("line %d: server_message (%d bytes) = %q, want it to hold %q", i, len(msg), msg, c.message)
				}
				if r["level"] == "ERROR" {
					errors++
					if r["msg"] != llm.RefusedMessage {
						t.Errorf("ERROR line %q", r["msg"])
					}
					if fix, _ := r["fix"].(string); !strings.Contains(fix, c.fix) {
						t.Errorf("ERROR line's fix = %q, want it to name %s", fix, c.fix)
					}
				}
			}
			if recs[0]["level"] != c.level {
				t.Errorf("first line at %v, want %s", recs[0]["level"], c.level)
			}
			if wantErrors := map[bool]int{true: 1, false: 0}[c.level == "ERROR"]; errors != wantErrors {
				t.Errorf("%d ERROR lines, want %d:\n%s", errors, wantErrors, out)
			}
			if c.level == "WARN" && (recs[c.attempt-1]["retry"] != false || c.attempt > 1 && recs[0]["retry"] != true) {
				t.Errorf("retry flags: first %v, last %v", recs[0]["retry"], recs[c.attempt-1]["retry"])
			}
			if got := scrape(t, met); !strings.Contains(got, `lisa_llm_failures_total{cause="`+string(c.cause)+`"} `+strconv.Itoa(2*c.attempt)) {
				t.Errorf("metrics lack %d failures of cause %s:\n%s", 2*c.attempt, c.cause, grepLines(got, "lisa_llm_"))
			}

			h := llmHealth(HealthReport{Status: "healthy"}, met, time.Now())
			if c.refuses != (h.Status == "degraded") || c.refuses != (h.LLMRefusing == string(c.cause)) {
				t.Fatalf("health while the server refuses: %+v (refuses every request: %v)", h, c.refuses)
			}
			if c.refuses && (len(h.Reasons) != 1 || !strings.Contains(h.Reasons[0], string(c.cause)) || !strings.Contains(h.Reasons[0], strconv.Itoa(c.status))) {
				t.Errorf("health reasons = %q", h.Reasons)
			}
			srv.Enqueue(llmfake.Answer("fine"))
			if _, err := client.Chat(context.Background(), messages.ChatRequest{Messages: []messages.ChatMessage{{Role: messages.RoleUser, Content: "hi"}}}); err != nil {
				t.Fatal(err)
			}
			if h := llmHealth(HealthReport{Status: "healthy"}, met, time.Now()); h.Status != "healthy" || len(h.Reasons) != 0 {
				t.Errorf("health once a request is answered: %+v", h)
			}
			if got := scrape(t, met); !strings.Contains(got, "lisa_llm_refusing 0") {
				t.Errorf("lisa_llm_refusing after an answer:\n%s", grepLines(got, "lisa_llm_"))
			}
		})
	}
}

// repeat returns n copies of s.
func repeat(s llmfake.Step, n int) []llmfake.Step {
	out := make([]llmfake.Step, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// failureLines returns the log records of failed LLM attempts.
func failureLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if _, ok := r["cause"]; ok {
			recs = append(recs, r)
		}
	}
	return recs
}

// scrape returns the metrics in Prometheus text format.
func scrape(t *testing.T, met *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	met.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// grepLines returns the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
