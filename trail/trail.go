package trail

import (
	"cmp"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// DefaultPerRoom is the default size of a room's ring
// (runtime.trail_events).
const DefaultPerRoom = 200

// Bounds of what the trail keeps besides the rings.
const (
	// maxSteps bounds an invocation's path; later steps replace the
	// last one kept.
	maxSteps = 16
	// maxNotAllowed bounds the rooms counted by name among those not
	// allowed; the rest are counted together.
	maxNotAllowed = 1024
	// maxToolOutcomes bounds the distinct tool outcomes counted per
	// invocation.
	maxToolOutcomes = 16
)

// Entry is what became of one event.
type Entry struct {
	Room    string  `json:"room"`
	EventID string  `json:"event_id"`
	Sender  string  `json:"sender,omitempty"`
	Kind    string  `json:"kind,omitempty"`
	Seen    int64   `json:"seen_ms"` // when the sync (or the room) first saw it
	Outcome Outcome `json:"outcome"`
	// Path is an invocation's progress, oldest first.
	Path []Step `json:"path,omitempty"`
	// End is set once an invocation (or a refusal's notice) ended.
	End *End `json:"end,omitempty"`
}

// Step is one point on an invocation's path.
type Step struct {
	AtMs    int64  `json:"at_ms"`
	What    string `json:"what"`
	Attempt uint32 `json:"attempt,omitempty"`
	Code    string `json:"code,omitempty"`
	// WaitMs is the wait a homeserver asked for before the next try
	// (StepSendFailed with retry_after_ms).
	WaitMs int64 `json:"wait_ms,omitempty"`
}

// Steps of an invocation's path.
const (
	StepQueued         = "queued"
	StepRefused        = "refused"
	StepStarted        = "started"
	StepAttemptOK      = "attempt_answered"
	StepAttemptFailed  = "attempt_failed"
	StepReplyReady     = "reply_ready"
	StepErrorReady     = "error_reply_ready"
	StepReplySent      = "reply_sent"
	StepSendFailed     = "send_failed"
	StepReconciled     = "reconciled"
	StepReplyHeld      = "reply_held"
	StepReplyAbandoned = "reply_abandoned"
	StepEdited         = "edited"
	StepRedacted       = "redacted"
	StepDropped        = "dropped"
	StepForbidden      = "reply_forbidden"
	StepHeldReleased   = "held_released"
	StepHeldDropped    = "held_dropped"
)

// End is how an invocation ended: the reply the homeserver holds, the
// time from the event being seen to the reply, and the work its attempts
// did.
type End struct {
	ReplyEventID string         `json:"reply_event_id,omitempty"`
	AnswerMs     int64          `json:"answer_ms,omitempty"`
	Reconciled   bool           `json:"reconciled,omitempty"`
	ErrorCode    string         `json:"error_code,omitempty"`
	LLMRequests  int            `json:"llm_requests"`
	ToolCalls    map[string]int `json:"tool_calls,omitempty"`
}

// Trail holds the rings of every room. It is safe for concurrent use.
type Trail struct {
	per int
	log *slog.Logger

	mu    sync.RWMutex
	rooms map[string]*ring

	naMu       sync.Mutex
	notAllowed map[string]int
	naOther    int
}

// ring is one room's recent entries: it grows to the trail's size, then
// the newest entry replaces the oldest.
type ring struct {
	mu      sync.Mutex
	entries []Entry
	next    int // where the next entry goes once full
	// work holds per-invocation tallies not yet in an End (LLM requests,
	// tool calls of attempts so far), keyed by event ID; bounded by the
	// ring (an entry leaving the ring takes its tally with it).
	work map[string]*End
}

// New returns a trail keeping perRoom entries per room (DefaultPerRoom
// if perRoom < 1); log receives the one warning per room that is not
// allowed.
func New(perRoom int, log *slog.Logger) *Trail {
	if perRoom < 1 {
		perRoom = DefaultPerRoom
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Trail{per: perRoom, log: log, rooms: map[string]*ring{}, notAllowed: map[string]int{}}
}

// PerRoom is the size of each room's ring.
func (t *Trail) PerRoom() int { return t.per }

// room returns room's ring, creating it if create is set.
func (t *Trail) room(room string, create bool) *ring {
	t.mu.RLock()
	r := t.rooms[room]
	t.mu.RUnlock()
	if r != nil || !create {
		return r
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r = t.rooms[room]; r == nil {
		r = &ring{}
		t.rooms[strings.Clone(room)] = r
	}
	return r
}

// Synced records what one committed /sync answer carried: each event's
// verdict, and the events of rooms that are not allowed (counted, and
// logged once per room).
func (t *Trail) Synced(b *messages.SyncBatch, now time.Time) {
	if b == nil {
		return
	}
	for _, se := range b.Seen {
		if se.EventID == "" || se.Room == "" {
			continue
		}
		r := t.room(se.Room, true)
		r.mu.Lock()
		if e := r.find(se.EventID); e != nil {
			r.mu.Unlock() // seen before (a repeated answer): keep what is known
			continue
		}
		r.add(t.per, Entry{Room: se.Room, EventID: strings.Clone(se.EventID), Sender: strings.Clone(se.Sender),
			Kind: se.Kind, Seen: now.UnixMilli(), Outcome: FromVerdict(se.Verdict, se.Kind)})
		r.mu.Unlock()
	}
	for _, room := range slices.Sorted(maps.Keys(b.NotAllowed)) {
		t.countNotAllowed(room, b.NotAllowed[room])
	}
}

// countNotAllowed counts n events of a room that is not allowed and
// warns the first time the room is seen.
func (t *Trail) countNotAllowed(room string, n int) {
	t.naMu.Lock()
	_, known := t.notAllowed[room]
	switch {
	case known:
		t.notAllowed[room] += n
	case len(t.notAllowed) < maxNotAllowed:
		t.notAllowed[strings.Clone(room)] = n
	default:
		t.naOther += n
		known = true // past the bound: counted, not warned about again
	}
	t.naMu.Unlock()
	if !known {
		t.log.Warn("events in a room that is not allowed are ignored and never read; to have Lisa answer there, add its ID to matrix.allowed_room_ids (lisa shell: trail shows the room ID)",
			"room", messages.RoomID(room), "events", n)
	}
}

// NotAllowed returns the counts of events per room that is not allowed,
// and the count of those past the bound of rooms counted by name.
func (t *Trail) NotAllowed() (map[string]int, int) {
	t.naMu.Lock()
	defer t.naMu.Unlock()
	return maps.Clone(t.notAllowed), t.naOther
}

// Journaled records a room journal event's meaning for the trail. It is
// called with each event the room persists (never on replay).
func (t *Trail) Journaled(room string, ev proto.Message, now time.Time) {
	ms := now.UnixMilli()
	switch e := ev.(type) {
	case *roompb.InvocationQueued:
		c := e.GetCandidate()
		if c.GetRedactsEventId() != "" || c.GetTrigger() == "edit_update" {
			return // redactions and edits taken in keep their own outcome
		}
		t.update(room, c.GetEventId(), c.GetSender(), ms, func(en *Entry, _ *ring) {
			en.Outcome = Invoked
			en.addStep(Step{AtMs: ms, What: StepQueued})
		})
	case *roompb.InvocationRefused:
		c := e.GetCandidate()
		t.update(room, c.GetEventId(), c.GetSender(), ms, func(en *Entry, _ *ring) {
			en.Outcome = RefusedQueueFull
			if e.GetReason() == "sender_rate" {
				en.Outcome = RefusedSenderRate
			}
			en.addStep(Step{AtMs: ms, What: StepRefused, Code: e.GetReason()})
		})
	case *roompb.InvocationStarted:
		t.update(room, e.GetEventId(), "", ms, func(en *Entry, _ *ring) {
			en.addStep(Step{AtMs: ms, What: StepStarted, Attempt: e.GetAttempt()})
		})
	case *roompb.InvocationFailed:
		t.update(room, e.GetEventId(), "", ms, func(en *Entry, r *ring) {
			en.addStep(Step{AtMs: ms, What: StepAttemptFailed, Attempt: e.GetAttempt(), Code: e.GetCode()})
			r.tally(en.EventID).ErrorCode = e.GetCode()
		})
	case *roompb.ReplyReady:
		t.update(room, e.GetEventId(), "", ms, func(en *Entry, _ *ring) {
			what := StepReplyReady
			if e.GetIsError() {
				what = StepErrorReady
			}
			en.addStep(Step{AtMs: ms, What: what})
		})
	case *roompb.ReplyHeld:
		t.update(room, e.GetEventId(), "", ms, func(en *Entry, _ *ring) {
			en.addStep(Step{AtMs: ms, What: StepReplyHeld})
		})
	case *roompb.ReplySent:
		t.update(room, e.GetEventId(), "", ms, func(en *Entry, r *ring) {
			what := StepReplySent
			if e.GetReconciled() {
				what = StepReconciled
			}
			en.addStep(Step{AtMs: ms, What: what})
			end := r.finish(en.EventID)
			end.ReplyEventID, end.Reconciled = e.GetReplyEventId(), e.GetReconciled()
			end.AnswerMs = max(ms-en.Seen, 0)
			en.End = end
			switch {
			case en.Outcome == RefusedQueueFull || en.Outcome == RefusedSenderRate:
				// the overload notice: the event stays refused
			case en.hasStep(StepErrorReady):
				en.Outcome = Failed(end.ErrorCode)
			default:
				en.Outcome, end.ErrorCode = Answered, ""
			}
		})
	case *roompb.ReplyAbandoned:
		t.update(room, e.GetEventId(), "", ms, func(en *Entry, r *ring) {
			en.addStep(Step{AtMs: ms, What: StepReplyAbandoned, Code: e.GetCode()})
			end := r.finish(en.EventID)
			end.ErrorCode = e.GetCode()
			en.End, en.Outcome = end, Failed(e.GetCode())
		})
	case *roompb.ReplyForbidden:
		t.update(room, e.GetEventId(), "", ms, func(en *Entry, _ *ring) {
			en.addStep(Step{AtMs: ms, What: StepForbidden, Code: e.GetCode()})
			en.Outcome = Held
		})
	case *roompb.HeldReleased:
		for _, id := range e.GetEventIds() {
			t.update(room, id, "", ms, func(en *Entry, _ *ring) {
				en.addStep(Step{AtMs: ms, What: StepHeldReleased, Code: e.GetReason()})
				if en.Outcome == Held {
					en.Outcome = Invoked
				}
			})
		}
	case *roompb.HeldDropped:
		t.update(room, e.GetEventId(), "", ms, func(en *Entry, r *ring) {
			en.addStep(Step{AtMs: ms, What: StepHeldDropped, Code: e.GetReason()})
			end := r.finish(en.EventID)
			end.ErrorCode = "held_" + e.GetReason()
			en.End, en.Outcome = end, Failed(end.ErrorCode)
		})
	case *roompb.InvocationEdited:
		t.update(room, e.GetEventId(), "", ms, func(en *Entry, _ *ring) {
			en.addStep(Step{AtMs: ms, What: StepEdited})
		})
	case *roompb.InvocationRedacted:
		t.update(room, e.GetEventId(), "", ms, func(en *Entry, _ *ring) {
			en.addStep(Step{AtMs: ms, What: StepRedacted})
			en.Outcome = Redacted
		})
	case *roompb.InvocationDropped:
		t.update(room, e.GetEventId(), "", ms, func(en *Entry, _ *ring) {
			en.addStep(Step{AtMs: ms, What: StepDropped, Code: e.GetCode()})
			en.Outcome = Redacted
			if e.GetCode() == string(RefusedBudget) {
				en.Outcome = RefusedBudget
			}
		})
	}
}

// SendFailed records a failed send of eventID's reply in room, with the
// code and the wait the homeserver asked for (a rate limit's
// retry_after_ms). The send is tried again after it.
func (t *Trail) SendFailed(room, eventID, code string, wait time.Duration, now time.Time) {
	ms := now.UnixMilli()
	t.update(room, eventID, "", ms, func(en *Entry, _ *ring) {
		en.addStep(Step{AtMs: ms, What: StepSendFailed, Code: code, WaitMs: wait.Milliseconds()})
	})
}

// Attempted records the work of one invocation attempt: its LLM requests
// and tool calls by outcome, and its error code if it failed.
func (t *Trail) Attempted(room, eventID string, attempt uint32, st messages.AttemptStats, code string, now time.Time) {
	ms := now.UnixMilli()
	t.update(room, eventID, "", ms, func(en *Entry, r *ring) {
		w := r.tally(eventID)
		w.LLMRequests += st.LLMRequests
		for k, n := range st.Tools {
			if _, ok := w.ToolCalls[k]; !ok && len(w.ToolCalls) >= maxToolOutcomes {
				k = "other"
			}
			if w.ToolCalls == nil {
				w.ToolCalls = map[string]int{}
			}
			w.ToolCalls[k] += n
		}
		if code == "" {
			en.addStep(Step{AtMs: ms, What: StepAttemptOK, Attempt: attempt})
		}
	})
}

// update runs f on the entry of eventID in room under the ring's lock,
// adding an entry first when the room knows of an event the trail does
// not (the trail starts empty after a restart).
func (t *Trail) update(room, eventID, sender string, ms int64, f func(*Entry, *ring)) {
	if room == "" || eventID == "" {
		return
	}
	r := t.room(room, true)
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.find(eventID)
	if e == nil {
		e = r.add(t.per, Entry{Room: room, EventID: strings.Clone(eventID), Sender: strings.Clone(sender), Kind: "text", Seen: ms, Outcome: Invoked})
	}
	f(e, r)
}

// find returns the entry of eventID, newest first; nil if the ring has
// none. The caller holds r.mu.
func (r *ring) find(eventID string) *Entry {
	n := len(r.entries)
	for i := range n {
		j := (r.next - 1 - i + 2*n) % n
		if r.entries[j].EventID == eventID {
			return &r.entries[j]
		}
	}
	return nil
}

// add appends e, replacing the oldest entry once the ring holds per.
// The caller holds r.mu.
func (r *ring) add(per int, e Entry) *Entry {
	if len(r.entries) < per {
		r.entries = append(r.entries, e)
		r.next = len(r.entries) % per
		return &r.entries[len(r.entries)-1]
	}
	delete(r.work, r.entries[r.next].EventID)
	r.entries[r.next] = e
	at := r.next
	r.next = (r.next + 1) % per
	return &r.entries[at]
}

// tally returns the running tally of an invocation's work.
func (r *ring) tally(eventID string) *End {
	if r.work == nil {
		r.work = map[string]*End{}
	}
	w := r.work[eventID]
	if w == nil {
		w = &End{}
		r.work[strings.Clone(eventID)] = w
	}
	return w
}

// finish takes an invocation's tally out, as its End.
func (r *ring) finish(eventID string) *End {
	w := r.tally(eventID)
	delete(r.work, eventID)
	return w
}

// addStep appends s to the path, within maxSteps.
func (e *Entry) addStep(s Step) {
	if len(e.Path) >= maxSteps {
		e.Path[maxSteps-1] = s
		return
	}
	e.Path = append(e.Path, s)
}

func (e *Entry) hasStep(what string) bool {
	return slices.ContainsFunc(e.Path, func(s Step) bool { return s.What == what })
}

// clone copies e deeply enough for a reader outside the lock.
func (e Entry) clone() Entry {
	e.Path = slices.Clone(e.Path)
	if e.End != nil {
		end := *e.End
		end.ToolCalls = maps.Clone(end.ToolCalls)
		e.End = &end
	}
	return e
}

// Why returns the entry of eventID in any room.
func (t *Trail) Why(eventID string) (Entry, bool) {
	t.mu.RLock()
	rings := slices.Collect(maps.Values(t.rooms))
	t.mu.RUnlock()
	for _, r := range rings {
		r.mu.Lock()
		e := r.find(eventID)
		var out Entry
		if e != nil {
			out = e.clone()
		}
		r.mu.Unlock()
		if e != nil {
			return out, true
		}
	}
	return Entry{}, false
}

// Recent returns up to n entries, newest first: room's, or every room's
// when room is "".
func (t *Trail) Recent(room string, n int) []Entry {
	var rings []*ring
	t.mu.RLock()
	if room != "" {
		if r := t.rooms[room]; r != nil {
			rings = append(rings, r)
		}
	} else {
		rings = slices.Collect(maps.Values(t.rooms))
	}
	t.mu.RUnlock()
	var out []Entry
	for _, r := range rings {
		r.mu.Lock()
		m := len(r.entries)
		for i := range min(n, m) {
			j := (r.next - 1 - i + 2*m) % m
			out = append(out, r.entries[j].clone())
		}
		r.mu.Unlock()
	}
	slices.SortStableFunc(out, func(a, b Entry) int { return cmp.Compare(b.Seen, a.Seen) })
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// Rooms returns the number of rooms with a ring.
func (t *Trail) Rooms() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.rooms)
}
