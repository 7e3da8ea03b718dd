package llm

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// TestModels: the listed IDs come back in order; a refused key, a server
// without the endpoint and one that is down are told apart by status, and
// the key appears in no error.
func TestModels(t *testing.T) {
	ctx := context.Background()
	const key = "sk-models-test-key-123"
	srv := llmfake.Start(t, llmfake.WithModels("small", "large"), llmfake.WithAPIKey(key))

	got, err := New(Config{BaseURL: srv.URL(), APIKey: key, Timeout: 5 * time.Second}).Models(ctx)
	if err != nil || !slices.Equal(got, []string{"small", "large"}) {
		t.Fatalf("models: %v, %v", got, err)
	}

	_, err = New(Config{BaseURL: srv.URL(), APIKey: "sk-wrong-key-456", Timeout: 5 * time.Second}).Models(ctx)
	var me *ModelsError
	if !errors.As(err, &me) || me.Status != http.StatusUnauthorized || me.Err.Code != messages.CodeLLMRejected {
		t.Fatalf("wrong key: %#v", err)
	}
	if strings.Contains(err.Error(), "sk-wrong-key-456") {
		t.Fatalf("the key is in the error: %v", err)
	}

	none := httptest.NewServer(http.NotFoundHandler())
	defer none.Close()
	_, err = New(Config{BaseURL: none.URL + "/v1", Timeout: 5 * time.Second}).Models(ctx)
	if !errors.As(err, &me) || me.Status != http.StatusNotFound {
		t.Fatalf("no endpoint: %#v", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = New(Config{BaseURL: "http://" + addr + "/v1", Timeout: 5 * time.Second}).Models(ctx)
	if !errors.As(err, &me) || me.Status != 0 || me.Err.Code != messages.CodeLLMUnavailable || !strings.Contains(me.Cause, "refused") {
		t.Fatalf("down: %#v", err)
	}
}
