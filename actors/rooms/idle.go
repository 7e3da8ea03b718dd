package rooms

import (
	"strings"

	"github.com/asynkron/protoactor-go/actor"
)

// RoomBusy is what a room actor tells its parent (with Request, so the
// supervisor knows the sender) whenever it starts or stops work a graceful
// shutdown waits for: running an invocation, sending a reply or looking
// one up (phases running, sending, reconciling). It is sent on changes
// only; a new incarnation starts idle, and the supervisor forgets what its
// predecessor reported when it fails, stops or reports live.
type RoomBusy struct {
	Busy bool
}

// IdleRequest asks the supervisor how many rooms are busy; it answers
// with *Idle.
type IdleRequest struct{}

// Idle answers IdleRequest.
type Idle struct {
	// Busy counts the rooms that hold a concurrency slot or have reported
	// RoomBusy, each once. Zero means no room has work in hand that a
	// graceful shutdown should wait for.
	Busy int
}

// roomBusy records what a room reported. A report from an actor that is
// not a current child (one that stopped while the report was on its way)
// is dropped: nothing would ever clear it.
func (s *supervisor) roomBusy(ctx actor.Context, m *RoomBusy) {
	sender := ctx.Sender()
	if sender == nil {
		return
	}
	if !m.Busy {
		delete(s.busy, sender.Id)
		return
	}
	room, ok := strings.CutPrefix(sender.Id, ctx.Self().Id+"/")
	if pid := s.children[room]; ok && pid != nil && pid.Id == sender.Id {
		s.busy[sender.Id] = true
	}
}

// idle answers how many rooms are busy: slot holders and rooms that
// reported RoomBusy, each counted once.
func (s *supervisor) idle() *Idle {
	n := len(s.holders)
	for id := range s.busy {
		if _, held := s.holders[id]; !held {
			n++
		}
	}
	return &Idle{Busy: n}
}
