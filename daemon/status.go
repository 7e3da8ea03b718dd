package daemon

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/lisabot/lisa/adapters/status"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/trail"
)

// Bounds of the status page.
const (
	// statusRooms is how many allowed rooms the page lists.
	statusRooms = 100
	// statusTrail is how many recent events it lists.
	statusTrail = 50
	// statusLatencySamples is how many recent events the latency
	// histogram looks through for answered invocations.
	statusLatencySamples = 1000
	// roomNameTTL is how long a room name is shown before it is read
	// again.
	roomNameTTL = 5 * time.Minute
	// roomNameTimeout bounds one read of a room name.
	roomNameTimeout = 5 * time.Second
)

// RoomNamer reads a room's name from the homeserver.
type RoomNamer interface {
	RoomName(ctx context.Context, room string) (string, error)
}

// roomNames caches room names for the status page. Names are read in the
// background, one at a time, so the page never waits for the homeserver;
// a room shows its ID until its name is known.
type roomNames struct {
	namer RoomNamer
	mu    sync.Mutex
	names map[string]roomName
	busy  bool
	// closed is set by close: no reading starts after it; reading holds
	// the reader that runs, and cancel ends its request.
	closed  bool
	reading sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
}

type roomName struct {
	name string
	at   time.Time
}

// get returns the names known now and starts reading the missing and
// stale ones of rooms.
func (n *roomNames) get(rooms []string, now time.Time) map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]string{}
	var stale []string
	for _, r := range rooms {
		rn, ok := n.names[r]
		if ok {
			out[r] = rn.name
		}
		if !ok || now.Sub(rn.at) > roomNameTTL {
			stale = append(stale, r)
		}
	}
	if len(stale) > 0 && !n.busy && !n.closed && n.namer != nil {
		n.busy = true
		if n.ctx == nil {
			n.ctx, n.cancel = context.WithCancel(context.Background())
		}
		n.reading.Add(1)
		go n.read(n.ctx, stale)
	}
	return out
}

// close stops the reader, if one runs, and waits for it.
func (n *roomNames) close() {
	n.mu.Lock()
	n.closed = true
	if n.cancel != nil {
		n.cancel()
	}
	n.mu.Unlock()
	n.reading.Wait()
}

// read reads the names of rooms, one at a time, until parent ends.
func (n *roomNames) read(parent context.Context, rooms []string) {
	defer n.reading.Done()
	defer func() {
		n.mu.Lock()
		n.busy = false
		n.mu.Unlock()
	}()
	for _, r := range rooms {
		if parent.Err() != nil {
			return
		}
		ctx, cancel := context.WithTimeout(parent, roomNameTimeout)
		name, err := n.namer.RoomName(ctx, r)
		cancel()
		n.mu.Lock()
		if err == nil {
			if n.names == nil {
				n.names = map[string]roomName{}
			}
			n.names[r] = roomName{name: name, at: time.Now()}
		}
		n.mu.Unlock()
	}
}

// statusPage gathers the status page's data: health, rooms, actors, the
// event trail and the latency of recent answers. No body, prompt, token
// or display name is in any of them.
func (d *Daemon) statusPage(ctx context.Context) (status.Page, error) {
	now := time.Now()
	// Every room is asked once, within ctx; the listed rooms' rows come
	// from the same answers.
	h, statuses, running := d.healthWithin(ctx)
	pg := status.Page{GeneratedAt: now, Health: status.Health{Status: h.Status, Reasons: h.Reasons,
		LastSyncAgeSeconds: h.LastSyncAgeSeconds, RoomsRunning: h.RoomsRunning, RoomsStopped: h.RoomsStopped, ToolQueue: h.ToolQueue},
		Version: d.build.String()}
	rooms := d.rooms
	if len(rooms) > statusRooms {
		pg.MoreRooms = len(rooms) - statusRooms
		rooms = rooms[:statusRooms]
	}
	names := d.names.get(rooms, now)
	for _, id := range rooms {
		row := status.Room{ID: id, Name: names[id], Running: running[messages.RoomID(id)], State: "stopped"}
		if st, ok := statuses[id]; ok {
			row.State, row.Queue, row.Answered = st.Phase, len(st.Queue), st.Answered
			if st.LastReplyAtMs > 0 {
				row.LastAnswer = time.UnixMilli(st.LastReplyAtMs)
			}
		}
		pg.Rooms = append(pg.Rooms, row)
	}
	var actors []status.Actor
	for _, s := range d.sys.Registry.Snapshot(d.sys.Actors) {
		actors = append(actors, status.Actor{ID: s.ID, Mailbox: s.Len, Posted: s.Posted, Received: s.Received, Restarts: s.Restarts, Failures: s.Failures})
	}
	pg.Actors, pg.ActorTotals = status.TopActors(actors, status.MaxActors)
	recent := d.trail.Recent("", statusLatencySamples)
	var took []int64
	for i, e := range recent {
		if i < statusTrail {
			pg.Trail = append(pg.Trail, trailEvent(e))
		}
		if e.Outcome == trail.Answered && e.End != nil && e.End.AnswerMs > 0 {
			took = append(took, e.End.AnswerMs)
		}
	}
	pg.Latency = status.Histogram(took)
	na, _ := d.trail.NotAllowed()
	for _, r := range slices.Sorted(maps.Keys(na)) {
		pg.NotAllowed = append(pg.NotAllowed, status.NotAllowed{Room: r, Events: na[r]})
	}
	return pg, nil
}

// trailEvent is a trail entry as the page shows it.
func trailEvent(e trail.Entry) status.Event {
	ev := status.Event{Seen: time.UnixMilli(e.Seen), Room: e.Room, EventID: e.EventID, Sender: e.Sender, Kind: e.Kind, Outcome: string(e.Outcome)}
	if e.End != nil {
		ev.ReplyEventID, ev.AnswerMs, ev.LLMRequests = e.End.ReplyEventID, e.End.AnswerMs, e.End.LLMRequests
		for _, n := range e.End.ToolCalls {
			ev.ToolCalls += n
		}
	}
	return ev
}
