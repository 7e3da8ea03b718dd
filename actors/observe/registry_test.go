package observe

import (
	"slices"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// recorder is a message invoker that records what it is given.
type recorder struct{ got []string }

func (r *recorder) InvokeSystemMessage(msg any) { r.got = append(r.got, "system:"+msg.(string)) }
func (r *recorder) InvokeUserMessage(msg any)   { r.got = append(r.got, "user:"+msg.(string)) }
func (r *recorder) EscalateFailure(any, any)    {}

// TestMessagesPostedBeforeHandlersWait: protoactor registers a spawned
// process before its mailbox has a dispatcher, and a message posted in
// that window used to crash the process (nil dispatcher; a room's effect
// reaching the room's successor in a chaos campaign). The tracked mailbox
// keeps such messages and delivers them, in order, once the handlers are
// registered; the counters see each user message once.
func TestMessagesPostedBeforeHandlersWait(t *testing.T) {
	mb := NewRegistry().Mailbox()()
	mb.PostUserMessage("early-1")
	mb.PostSystemMessage("early-sys")
	mb.PostUserMessage("early-2")
	rec := &recorder{}
	mb.RegisterHandlers(rec, actor.NewSynchronizedDispatcher(300))
	mb.PostUserMessage("late")
	mb.Start()
	// The synchronized dispatcher runs each message as it is posted, so
	// the delivery order is the order in which they were handed on: the
	// order of posting.
	want := []string{"user:early-1", "system:early-sys", "user:early-2", "user:late"}
	if !slices.Equal(rec.got, want) {
		t.Fatalf("delivered %v, want %v", rec.got, want)
	}
	tr := mb.(*tracked)
	if p, r := tr.posted.Load(), tr.received.Load(); p != 3 || r != 3 {
		t.Fatalf("counted %d posted, %d received; want 3 and 3", p, r)
	}
}
