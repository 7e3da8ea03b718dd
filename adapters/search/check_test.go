package search

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/searxfake"
)

// TestCheckReportsStatus: Check gives the HTTP status beside the error, so
// a refused format=json (403) can be told apart, and counts the results of
// an answer.
func TestCheckReportsStatus(t *testing.T) {
	s := searxfake.Start(t)
	c := New(Config{Endpoint: s.URL(), Timeout: 5 * time.Second})
	ctx := context.Background()

	s.Enqueue(searxfake.Status(http.StatusForbidden))
	p, err := c.Check(ctx, "lisa doctor")
	if p.Status != http.StatusForbidden {
		t.Fatalf("403: got %+v", p)
	}
	wantToolErr(t, err, messages.ToolSearchUnavailable, false)

	s.Enqueue(searxfake.Results(searxfake.Result{URL: "https://one.test/a", Title: "One", Content: "hit"}))
	p, err = c.Check(ctx, "lisa doctor")
	if err != nil || p.Status != http.StatusOK || p.Results != 1 {
		t.Fatalf("200: got %+v, %v", p, err)
	}
	if r := s.Requests(); len(r) != 2 || r[1].Format != "json" || r[1].Query != "lisa doctor" {
		t.Fatalf("requests: %+v", r)
	}

	// No answer: the network cause, without the URL; the tool error
	// stays what the model sees.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/search"
	ln.Close()
	p, err = New(Config{Endpoint: down, Timeout: 5 * time.Second}).Check(ctx, "lisa doctor")
	if p.Status != 0 || !strings.Contains(p.Cause, "connection refused") || strings.Contains(p.Cause, down) {
		t.Fatalf("down: %+v", p)
	}
	wantToolErr(t, err, messages.ToolSearchUnavailable, true)
	_, err = New(Config{Endpoint: down, Timeout: 5 * time.Second}).Search(ctx, "lisa doctor")
	if _, ok := err.(*messages.ToolError); !ok {
		t.Fatalf("Search returns %T, want the bare *messages.ToolError", err)
	}
}
