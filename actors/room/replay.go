package room

import (
	"fmt"

	actorpersist "github.com/asynkron/protoactor-go/persistence"
	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages/roompb"
)

// Replay rebuilds a room's durable state from its journal the way
// recovery does — the newest snapshot, then every event after it — without
// running the actor. name is the room actor's ID (see app.RoomActorID).
// Chaos campaigns compare the result with the live state's Digest.
func Replay(ps actorpersist.ProviderState, name string) (st State, err error) {
	defer func() {
		if r := recover(); r != nil { // the provider panics on storage errors
			err = fmt.Errorf("room: replaying %s: %v", name, r)
		}
	}()
	index := 0
	if snap, i, ok := ps.GetSnapshot(name); ok {
		s, ok := snap.(*roompb.RoomSnapshot)
		if !ok {
			return State{}, fmt.Errorf("room: snapshot of %s is a %T", name, snap)
		}
		st, index = FromSnapshot(s), i
	}
	var applyErr error
	ps.GetEvents(name, index, 0, func(e any) {
		if applyErr != nil {
			return
		}
		ev, ok := e.(proto.Message)
		if !ok {
			applyErr = fmt.Errorf("room: journal event of %s is a %T", name, e)
			return
		}
		applyErr = st.Apply(ev)
	})
	if applyErr != nil {
		return State{}, fmt.Errorf("room: replaying %s: %w", name, applyErr)
	}
	return st, nil
}
