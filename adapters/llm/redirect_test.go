package llm

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/redirector"
)

// TestAPIKeyStaysHome (#39 item 3): an LLM server that redirects to
// another port of the same host (307 and 308 keep the POST and its body)
// gets no request from Lisa there, so the key is not delivered; the error
// says why and does not name the key. Before the guard Go copied
// "Authorization: Bearer sk-…" to the other port.
func TestAPIKeyStaysHome(t *testing.T) {
	const key = "sk-redirect-secret-4242"
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		p := redirector.Start(t, status)
		c := New(Config{BaseURL: p.HomeURL + "/v1", APIKey: key, Model: "m", Timeout: 5 * time.Second, MaxAttempts: 1})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, chatErr := c.Chat(ctx, messages.ChatRequest{Messages: []messages.ChatMessage{{Role: messages.RoleUser, Content: "hi"}}})
		_, modelsErr := c.Models(ctx)
		cancel()
		for name, err := range map[string]error{"Chat": chatErr, "Models": modelsErr} {
			if err == nil || !strings.Contains(err.Error(), "redirect") {
				t.Errorf("%d: %s: %v, want a refused redirect", status, name, err)
			} else if strings.Contains(err.Error(), key) {
				t.Errorf("%d: %s: error names the key: %v", status, name, err)
			}
		}
		if p.Credentialed() != 0 || p.Reached() != 0 {
			t.Errorf("%d: the other port got %d requests, %d with the key", status, p.Reached(), p.Credentialed())
		}
	}
}
