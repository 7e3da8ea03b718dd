package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/actors/orchestrate"
	"github.com/lisabot/lisa/adapters/render"
	"github.com/lisabot/lisa/adapters/roomctx"
	"github.com/lisabot/lisa/messages/roompb"
)

// downFetcher fails every Matrix read: the context is the invocation alone.
type downFetcher struct{}

func (downFetcher) Context(context.Context, id.RoomID, id.EventID, *mautrix.FilterPart, int) (*mautrix.RespContext, error) {
	return nil, errors.New("down")
}
func (downFetcher) GetEvent(context.Context, id.RoomID, id.EventID) (*event.Event, error) {
	return nil, errors.New("down")
}
func (downFetcher) JoinedMembers(context.Context, id.RoomID) (*mautrix.RespJoinedMembers, error) {
	return nil, errors.New("down")
}

// scriptLLM answers with fixed responses in order.
type scriptLLM struct{ resps []orchestrate.ChatResponse }

func (s *scriptLLM) Chat(context.Context, orchestrate.ChatRequest) (orchestrate.ChatResponse, error) {
	if len(s.resps) == 0 {
		return orchestrate.ChatResponse{}, errors.New("script exhausted")
	}
	r := s.resps[0]
	s.resps = s.resps[1:]
	return r, nil
}

func final(md string) orchestrate.ChatResponse {
	b, _ := json.Marshal(map[string]any{"markdown": md, "source_urls": []string{}})
	return orchestrate.ChatResponse{Content: string(b)}
}

// TestAnswererFallbacks: what the room sees for each outcome of the loop;
// fallback texts are the configured persona texts, each in its place.
func TestAnswererFallbacks(t *testing.T) {
	const generic, overload = "GENERIC-persona-text", "OVERLOAD-persona-text"
	cases := []struct {
		name  string
		resps []orchestrate.ChatResponse
		lim   orchestrate.Limits
		want  string
	}{
		{"answer", []orchestrate.ChatResponse{final("**Hello** there")}, orchestrate.Limits{}, "Hello there"},
		{"malformed twice", []orchestrate.ChatResponse{{Content: "prose"}, {Content: "more prose"}}, orchestrate.Limits{}, generic},
		{"limits exhausted", []orchestrate.ChatResponse{{ToolCalls: []orchestrate.ToolCall{{ID: "1", Name: "nope", Arguments: "{}"}}}},
			orchestrate.Limits{MaxIterations: 1}, overload},
		{"nothing renderable", []orchestrate.ChatResponse{final("![](https://example.org/x.png)")}, orchestrate.Limits{}, generic},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := answerer{
				context: roomctx.New(downFetcher{}, "@lisa:hs", roomctx.Limits{MaxEvents: 10, MaxCharacters: 4000, MaxEventCharacters: 1000, MaxReplyDepth: 1}),
				llm:     &scriptLLM{resps: c.resps}, persona: "persona", limits: c.lim,
				render: render.New(), generic: generic, overload: overload,
			}
			content, err := a.Invoke(context.Background(), &roompb.Candidate{RoomId: "!r:hs", EventId: "$e", Sender: "@u:hs", Body: "hi Lisa"}, 1)
			if err != nil {
				t.Fatal(err)
			}
			var msg struct {
				Body      string `json:"body"`
				RelatesTo struct {
					InReplyTo struct {
						EventID string `json:"event_id"`
					} `json:"m.in_reply_to"`
				} `json:"m.relates_to"`
			}
			if err := json.Unmarshal(content, &msg); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(msg.Body, c.want) || msg.RelatesTo.InReplyTo.EventID != "$e" {
				t.Fatalf("reply = %s, want body with %q replying to $e", content, c.want)
			}
		})
	}
}
