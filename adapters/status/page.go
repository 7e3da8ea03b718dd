package status

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Page is everything the status page shows; /status.json is its JSON.
type Page struct {
	GeneratedAt    time.Time `json:"generated_at"`
	RefreshSeconds int       `json:"refresh_seconds"`
	Health         Health    `json:"health"`
	// Version is the one line of the binary's build info.
	Version string `json:"version,omitempty"`
	Rooms   []Room `json:"rooms"`
	// MoreRooms counts allowed rooms left off the page.
	MoreRooms int `json:"more_rooms,omitempty"`
	// Actors are the actors with the fullest mailboxes and the most
	// failures and restarts (at most MaxActors, see TopActors);
	// ActorTotals sums every live actor.
	Actors      []Actor      `json:"actors"`
	ActorTotals ActorTotals  `json:"actor_totals"`
	Trail       []Event      `json:"trail"`
	Latency     []Bucket     `json:"latency"`
	NotAllowed  []NotAllowed `json:"not_allowed_rooms,omitempty"`
}

// Health is the health summary (as `lisa health`).
type Health struct {
	Status             string   `json:"status"`
	Reasons            []string `json:"reasons,omitempty"`
	LastSyncAgeSeconds float64  `json:"last_sync_age_seconds"`
	RoomsRunning       int      `json:"rooms_running"`
	RoomsStopped       int      `json:"rooms_stopped"`
	ToolQueue          int      `json:"tool_queue"`
}

// Room is one allowed room.
type Room struct {
	ID string `json:"id"`
	// Name is the room's m.room.name, "" when unknown: homeserver text.
	Name     string `json:"name,omitempty"`
	Running  bool   `json:"running"`
	State    string `json:"state"`
	Queue    int    `json:"queue"`
	Answered uint64 `json:"answered"`
	// LastAnswer is when Lisa last answered in the room (zero: never).
	LastAnswer time.Time `json:"last_answer,omitzero"`
}

// Actor is one actor of the tree with its mailbox figures.
type Actor struct {
	ID       string `json:"id"`
	Mailbox  int    `json:"mailbox"`
	Posted   int64  `json:"posted"`
	Received int64  `json:"received"`
	Restarts int64  `json:"restarts"`
	Failures int64  `json:"failures"`
}

// ActorTotals sums the figures of every live actor.
type ActorTotals struct {
	Count    int   `json:"count"`
	Mailbox  int   `json:"mailbox"`
	Restarts int64 `json:"restarts"`
	Failures int64 `json:"failures"`
	// Shown is how many of them the page lists.
	Shown int `json:"shown"`
}

// MaxActors is how many actors the page lists.
const MaxActors = 50

// TopActors returns at most n of all: the actors outside app/rooms/
// (the few fixed ones: app, rooms, sync, tools and its workers) first,
// then the others by mailbox, failures and restarts, highest first, in
// ID order where equal; and the totals of all. A page with 10,000 rooms
// lists n actors, not 10,000.
func TopActors(all []Actor, n int) ([]Actor, ActorTotals) {
	t := ActorTotals{Count: len(all)}
	for _, a := range all {
		t.Mailbox += a.Mailbox
		t.Restarts += a.Restarts
		t.Failures += a.Failures
	}
	fixed := func(a Actor) bool { return !strings.HasPrefix(a.ID, "app/rooms/") }
	sorted := slices.Clone(all)
	slices.SortStableFunc(sorted, func(a, b Actor) int {
		if fa, fb := fixed(a), fixed(b); fa != fb {
			if fa {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(b.Mailbox, a.Mailbox), cmp.Compare(b.Failures, a.Failures), cmp.Compare(b.Restarts, a.Restarts), strings.Compare(a.ID, b.ID))
	})
	sorted = sorted[:min(n, len(sorted))]
	t.Shown = len(sorted)
	return sorted, t
}

// Event is one entry of the event trail.
type Event struct {
	Seen         time.Time `json:"seen"`
	Room         string    `json:"room"`
	EventID      string    `json:"event_id"`
	Sender       string    `json:"sender,omitempty"`
	Kind         string    `json:"kind,omitempty"`
	Outcome      string    `json:"outcome"`
	ReplyEventID string    `json:"reply_event_id,omitempty"`
	AnswerMs     int64     `json:"answer_ms,omitempty"`
	LLMRequests  int       `json:"llm_requests,omitempty"`
	ToolCalls    int       `json:"tool_calls,omitempty"`
}

// Bucket is one bar of the latency histogram.
type Bucket struct {
	Label string `json:"label"`
	// UpToMs is the bucket's upper bound (0: no bound).
	UpToMs int64 `json:"up_to_ms,omitempty"`
	Count  int   `json:"count"`
	// Of is the count of the fullest bucket (the bars' scale).
	Of int `json:"-"`
}

// NotAllowed counts the events of a room Lisa is in but may not read.
type NotAllowed struct {
	Room   string `json:"room"`
	Events int    `json:"events"`
}

// latencyBounds are the histogram's upper bounds, in milliseconds.
var latencyBounds = []int64{1_000, 2_000, 5_000, 10_000, 30_000, 60_000}

// Histogram sorts times to answer (milliseconds) into the page's
// buckets: up to 1 s, 2 s, 5 s, 10 s, 30 s, 60 s, and longer.
func Histogram(ms []int64) []Bucket {
	out := make([]Bucket, len(latencyBounds)+1)
	for i, b := range latencyBounds {
		out[i] = Bucket{Label: fmt.Sprintf("≤ %s", time.Duration(b)*time.Millisecond), UpToMs: b}
	}
	out[len(latencyBounds)].Label = fmt.Sprintf("> %s", time.Duration(latencyBounds[len(latencyBounds)-1])*time.Millisecond)
	for _, v := range ms {
		i := len(latencyBounds)
		for j, b := range latencyBounds {
			if v <= b {
				i = j
				break
			}
		}
		out[i].Count++
	}
	top := 0
	for _, b := range out {
		top = max(top, b.Count)
	}
	for i := range out {
		out[i].Of = max(top, 1)
	}
	return out
}
