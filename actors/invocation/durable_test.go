package invocation

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// syncLog is a Durability that records, in one sequence with the model
// requests, when it was synced.
type syncLog struct {
	mu   sync.Mutex
	seq  []string
	fail error
}

func (s *syncLog) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq = append(s.seq, "sync")
	return s.fail
}

func (s *syncLog) note(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq = append(s.seq, what)
}

// runInvoker runs the model loop as the answerer does.
func runInvoker(llm LLM, tools []Tool) Invoker {
	return InvokerFunc(func(ctx context.Context, _ *roompb.Candidate, _ uint32) ([]byte, error) {
		ans, err := Run(ctx, llm, tools, Prompt{Persona: "p", ContextBlock: "c"}, Limits{})
		return []byte(ans.Markdown), err
	})
}

// The store is synced once, before the first model request, however many
// requests the invocation makes.
func TestDurableBeforeTheFirstModelRequest(t *testing.T) {
	log := &syncLog{}
	noted := func(s step) step {
		return func(req messages.ChatRequest) (messages.ChatResponse, error) {
			log.note("chat")
			return s(req)
		}
	}
	llm := newFakeLLM(noted(calls(call("c1", "lookup", `{}`))), noted(final("done")))
	inv := WithDurability(runInvoker(llm, []Tool{okTool("lookup", "found")}), log)
	if _, err := inv.Invoke(context.Background(), &roompb.Candidate{}, 1); err != nil {
		t.Fatal(err)
	}
	if got := log.seq; len(got) != 3 || got[0] != "sync" || got[1] != "chat" || got[2] != "chat" {
		t.Fatalf("sequence %v, want [sync chat chat]", got)
	}
}

// A store that cannot sync fails the attempt before the model is asked.
func TestNoModelRequestWithoutDurability(t *testing.T) {
	log := &syncLog{fail: errors.New("disk gone")}
	llm := newFakeLLM(final("never"))
	_, err := WithDurability(runInvoker(llm, nil), log).Invoke(context.Background(), &roompb.Candidate{}, 1)
	var le *messages.Error
	if !errors.As(err, &le) || le.Code != messages.CodeStorage {
		t.Fatalf("error %v, want a storage error", err)
	}
	if n := len(llm.requests()); n != 0 {
		t.Fatalf("%d model requests after a failed sync", n)
	}
}
