package llm

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// TestChatSaysWhichAttemptsReachedTheServer (issue #39 item 4): a failure
// carries in LLMFailure.Sent how many attempts reached the server (the
// request written whole, or a reply begun), and a reply after retries
// says in Unanswered how many failed ones did; a refused connection, a
// name that does not resolve and a request go-openai refuses before
// sending reach nothing.
func TestChatSaysWhichAttemptsReachedTheServer(t *testing.T) {
	cases := []struct {
		name       string
		steps      []llmfake.Step
		mod        func(*Config)
		code       messages.Code // "" for a reply
		sent       int           // LLMFailure.Sent, or Unanswered of a reply
		requests   int           // chat requests the server received
		noServer   bool          // the client talks to no llmfake server
		customBase func(t *testing.T) string
	}{
		{name: "timeout after the request was written, retried", steps: []llmfake.Step{llmfake.Hang(), llmfake.Hang(), llmfake.Hang()},
			mod: func(c *Config) { c.Timeout = time.Second }, code: messages.CodeLLMTimeout, sent: 3, requests: 3},
		{name: "500, retried", steps: []llmfake.Step{llmfake.Error(500, "boom"), llmfake.Error(500, "boom"), llmfake.Error(500, "boom")},
			code: messages.CodeLLMUnavailable, sent: 3, requests: 3},
		{name: "401, not retried", steps: []llmfake.Step{llmfake.Error(401, "bad key")}, code: messages.CodeLLMRejected, sent: 1, requests: 1},
		{name: "undecodable 200", steps: []llmfake.Step{llmfake.Truncated()}, code: messages.CodeLLMBadResponse, sent: 1, requests: 1},
		{name: "no choices", steps: []llmfake.Step{llmfake.EmptyChoices()}, code: messages.CodeLLMBadResponse, sent: 1, requests: 1},
		{name: "connection dropped after the request", steps: []llmfake.Step{llmfake.Drop()}, mod: func(c *Config) { c.MaxAttempts = 1 },
			code: messages.CodeLLMUnavailable, sent: 1, requests: 1},
		{name: "a reply after two 500s", steps: []llmfake.Step{llmfake.Error(500, "boom"), llmfake.Error(500, "boom"), llmfake.Text("fine")},
			sent: 2, requests: 3},
		{name: "a reply at once", steps: []llmfake.Step{llmfake.Text("fine")}, sent: 0, requests: 1},
		{name: "cut body", noServer: true, code: messages.CodeLLMBadResponse, sent: 1, mod: func(c *Config) { c.MaxAttempts = 1 },
			customBase: func(t *testing.T) string {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("Content-Length", "1000")
					_, _ = w.Write([]byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"he`))
					w.(http.Flusher).Flush()
					panic(http.ErrAbortHandler) // the connection ends mid-body
				}))
				t.Cleanup(srv.Close)
				return srv.URL + "/v1"
			}},
		{name: "connection refused", noServer: true, code: messages.CodeLLMUnavailable, sent: 0, customBase: func(t *testing.T) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			_ = ln.Close()
			return "http://" + addr + "/v1"
		}},
		{name: "name does not resolve", noServer: true, code: messages.CodeLLMUnavailable, sent: 0,
			mod: func(c *Config) {
				c.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
					return nil, &net.DNSError{Err: "no such host", Name: addr, IsNotFound: true}
				}}}
			},
			customBase: func(*testing.T) string { return "http://llm.invalid/v1" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := llmfake.Start(t, llmfake.WithModels("m"))
			srv.Enqueue(c.steps...)
			client, _ := chatClient(srv, func(cfg *Config) {
				if c.customBase != nil {
					cfg.BaseURL = c.customBase(t)
				}
				if c.mod != nil {
					c.mod(cfg)
				}
			})
			resp, err := client.Chat(context.Background(), simpleRequest())
			if got := messages.ErrorCode(err); c.code != "" && got != c.code || c.code == "" && err != nil {
				t.Fatalf("err = %v (code %s), want code %q", err, got, c.code)
			}
			got := resp.Unanswered
			if err != nil {
				f := messages.LLMFailureOf(err)
				if f == nil {
					t.Fatalf("err = %v carries no LLMFailure", err)
				}
				got = f.Sent
			}
			if got != c.sent {
				t.Errorf("sent = %d, want %d", got, c.sent)
			}
			if n := len(srv.Requests()); !c.noServer && n != c.requests {
				t.Errorf("server received %d requests, want %d", n, c.requests)
			}
		})
	}
}

// TestClientSideRefusalReachesNothing: a request go-openai refuses before
// sending says so (Sent 0).
func TestClientSideRefusalReachesNothing(t *testing.T) {
	srv := llmfake.Start(t, llmfake.WithModels("o1-mini"))
	c := New(Config{BaseURL: srv.URL(), Model: "o1-mini", MaxOutputTokens: 100, Timeout: 5 * time.Second,
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	_, err := c.Chat(context.Background(), messages.ChatRequest{Messages: []messages.ChatMessage{{Role: messages.RoleUser, Content: "hi"}}})
	if f := messages.LLMFailureOf(err); f == nil || f.Sent != 0 || len(srv.Requests()) != 0 {
		t.Fatalf("err = %v (failure %+v), %d requests; want one refused before sending", err, f, len(srv.Requests()))
	}
}
