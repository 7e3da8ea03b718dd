package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/backoff"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// BotLedger is the part of the bot-event ledger reply detection reads.
type BotLedger interface {
	IsBotEvent(room, eventID string) (bool, error)
	// Routed reports whether (room, eventID) was ever routed to its
	// room as a candidate: an edit of it can only update that invocation.
	Routed(room, eventID string) (bool, error)
}

// SyncOptions are the [matrix] sync settings.
type SyncOptions struct {
	// Timeout is the long-poll timeout (sync_timeout_ms).
	Timeout time.Duration
	// TimelineLimit is sync_timeline_limit.
	TimelineLimit int
	// GapPageLimit bounds back-fill pages per limited timeline.
	GapPageLimit int
	// Aliases are matrix.mention_aliases.
	Aliases []string
	// AllowedRooms are matrix.allowed_room_ids.
	AllowedRooms []string
	// ReadRetryDelay is the pause before the first repeat of a failed read
	// inside one /sync answer (a page of a room's history, the sender of a
	// replied-to event); it doubles per attempt. Zero means
	// DefaultReadRetryDelay.
	ReadRetryDelay time.Duration
	// OnEncrypted, if set, is called with an allowed room whose
	// m.room.encryption state event appears in a sync answer (its state or
	// timeline): Lisa cannot read that room any more. It may be called
	// more than once for a room and must not block.
	OnEncrypted func(room string)
}

// Reads made while handling one /sync answer (back-fill pages and reply
// lookups) are repeated in place when they fail transiently: one failed
// read fails the whole answer, and after a crash or a failed /sync the
// answer reads back every allowed room, so without repeats a homeserver
// that fails a few percent of requests could keep Lisa from ever
// completing one.
const (
	// DefaultReadRetryDelay is ReadRetryDelay's default.
	DefaultReadRetryDelay = 250 * time.Millisecond
	// readAttempts bounds the attempts of one read.
	readAttempts = 4
	// maxReadRetryWait caps one pause, a homeserver's retry_after_ms included.
	maxReadRetryWait = 2 * time.Second
)

// A reply lookup that keeps failing transiently (after readAttempts in
// place) fails its answer, so that a flaky homeserver does not cost a reply
// to Lisa: the answer is read again after the syncer's backoff. That alone
// would let one event whose lookup the homeserver fails every time (a 500
// on that one ID) hold the cursor, and every room, back forever. So a
// lookup for the same event that has failed in replyLookupStallAnswers
// answers, the first of them at least replyLookupStallTime ago, with no
// complete answer in between, is given up at its next failure: the event
// counts as RejectReplyLookupAbandoned (not a reply to Lisa), an error is
// logged, and the answer goes on. Both bounds must be reached: the count
// keeps a jumping clock from giving up at once, the time keeps quick
// retries from giving up within a short outage. A failure because the
// request's context ended (Lisa stopping, the syncer's watchdog) counts
// for nothing. Permanent answers never fail an answer at all
// (RejectReplyTargetRejected).
const (
	replyLookupStallAnswers = 5
	replyLookupStallTime    = 10 * time.Minute
)

// Source performs Lisa's controlled /sync: one request at a time with an
// explicit since token, classification of the timelines, and back-fill of
// limited timelines.
type Source struct {
	c          *Client
	opts       SyncOptions
	classifier *Classifier
	filterJSON string // the inline filter of every request
	ledger     BotLedger
	log        *slog.Logger
	now        func() time.Time
	// verify is set when a /sync failed: the next response is checked
	// room by room against the homeserver's history (see Next).
	verify atomic.Bool
	// checked is the next_batch of the last answer that was read back
	// room by room, until a later request starts from it (the sync
	// committed it).
	checked atomic.Value // string
	// pending are the allowed rooms still to be read back after a failed
	// /sync (or an unclean stop), each with the UpdatedAtMs of the cursor
	// it became pending at; checkChunk bounds the pending rooms an answer
	// reads back besides its own (see Next).
	pendingMu  sync.Mutex
	pending    map[id.RoomID]int64
	checkChunk int
	// answered is set once a /sync request of this process got an
	// answer: the first one does not long-poll.
	answered atomic.Bool

	// stalls are the events whose reply lookups failed answers since the
	// last complete one (see replyLookupStallAnswers).
	stallMu sync.Mutex
	stalls  map[stallKey]*stall
}

// stallKey names an event whose reply lookup failed.
type stallKey struct {
	room  id.RoomID
	event id.EventID
}

// stall is the record of one event's failed reply lookups.
type stall struct {
	answers int       // answers its lookup failed
	since   time.Time // when the first of them failed
}

// maxStalls bounds the record; past it, it starts again (a homeserver
// failing that many different lookups is failing them all).
const maxStalls = 1024

// stalled records that the reply lookup of event failed in this answer
// and reports whether it is to be given up instead of failing the answer
// (see replyLookupStallAnswers). A failure because ctx ended is not
// recorded.
func (s *Source) stalled(ctx context.Context, room id.RoomID, event id.EventID) bool {
	if ctx.Err() != nil {
		return false
	}
	now := s.now()
	s.stallMu.Lock()
	defer s.stallMu.Unlock()
	k := stallKey{room, event}
	st := s.stalls[k]
	if st == nil {
		if s.stalls == nil || len(s.stalls) >= maxStalls {
			s.stalls = map[stallKey]*stall{}
		}
		st = &stall{since: now}
		s.stalls[k] = st
	}
	if st.answers >= replyLookupStallAnswers && now.Sub(st.since) >= replyLookupStallTime {
		return true // kept: the answer may still fail later on
	}
	st.answers++
	return false
}

// forgetStalls clears the record of failed reply lookups once an answer
// is complete: its cursor moves past them.
func (s *Source) forgetStalls() {
	s.stallMu.Lock()
	s.stalls = nil
	s.stallMu.Unlock()
}

// NewSource returns a sync source for c.
func NewSource(c *Client, opts SyncOptions, ledger BotLedger, log *slog.Logger, now func() time.Time) *Source {
	return &Source{
		c: c, opts: opts, ledger: ledger, log: log, now: now,
		classifier: NewClassifier(c.UserID(), opts.AllowedRooms, opts.Aliases),
		filterJSON: syncFilter(opts.TimelineLimit),
		pending:    map[id.RoomID]int64{},
		checkChunk: checkRoomsPerAnswer,
	}
}

// checkRoomsPerAnswer bounds the pending rooms one answer reads back
// besides the rooms it brings: after a crash with 10,000 rooms, reading
// every room back before the first answer took 1.2 s; the rooms with new
// events are read back at once, the others over the next answers (each
// answer also commits the cursor, with an anchor per room: 128 rooms an
// answer keeps those commits few).
const checkRoomsPerAnswer = 128

// timelineTypes are the event types Lisa reads from room timelines:
// messages (and their edits) and redactions.
var timelineTypes = []event.Type{event.EventMessage, event.EventRedaction}

// lastOfTypes is the ID of the newest of events (oldest first) whose type
// is one of types, "" if none is.
func lastOfTypes(events []*event.Event, types []event.Type) string {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i] != nil && slices.ContainsFunc(types, func(t event.Type) bool { return t.Type == events[i].Type.Type }) {
			return string(events[i].ID)
		}
	}
	return ""
}

// syncFilter is the inline /sync filter: room messages and redactions
// only, at most limit per timeline, nothing else.
func syncFilter(limit int) string {
	none := map[string]any{"not_types": []string{"*"}}
	f := map[string]any{
		"presence":     none,
		"account_data": none,
		"room": map[string]any{
			"timeline": map[string]any{"limit": limit, "types": []string{
				event.EventMessage.Type, event.EventRedaction.Type, event.StateEncryption.Type,
				event.StatePowerLevels.Type, event.StateMember.Type}},
			// Encryption, to tell the operator about a room Lisa can no
			// longer read (see SyncOptions.OnEncrypted); power levels and
			// membership, to send the replies held after M_FORBIDDEN once
			// Lisa may post again (see permissionChanges).
			"state": map[string]any{"types": []string{event.StateEncryption.Type,
				event.StatePowerLevels.Type, event.StateMember.Type}},
			"ephemeral":    none,
			"account_data": none,
		},
	}
	b, _ := json.Marshal(f)
	return string(b)
}

// VerifyNext makes the next incremental answer be read back room by room,
// as after a failed /sync. The daemon calls it at start when the previous
// run did not stop cleanly: a /sync may have failed in that run (the
// homeserver restarting), and the knowledge died with it.
func (s *Source) VerifyNext() { s.verify.Store(true) }

// VerifyPending reports whether rooms remain to be read back: the last
// /sync failed, VerifyNext was called since, or the rooms of an earlier
// check are not all read back yet.
func (s *Source) VerifyPending() bool {
	if s.verify.Load() {
		return true
	}
	s.pendingMu.Lock()
	defer s.pendingMu.Unlock()
	return len(s.pending) > 0
}

// checkRooms returns the rooms this answer reads back, each with the
// UpdatedAtMs of the cursor it became pending at: a failed /sync (or
// VerifyNext) makes every allowed room pending; of the pending rooms, the
// answer reads back those it brings events of, before classifying them,
// and up to checkChunk others, in order (fetchParallel in the answer that
// made rooms pending, so that it is not held up). A room read back in a complete
// answer is no longer pending (see finish).
func (s *Source) checkRooms(prev *roompb.SyncCursor, resp *mautrix.RespSync) map[id.RoomID]int64 {
	s.pendingMu.Lock()
	defer s.pendingMu.Unlock()
	chunk := s.checkChunk
	if s.verify.Load() {
		for room := range s.classifier.allowed {
			if _, ok := s.pending[room]; !ok {
				s.pending[room] = prev.GetUpdatedAtMs()
				// The first answer after a failure (or a crash) is read
				// at once: it reads one round of other rooms only.
				chunk = min(s.checkChunk, fetchParallel)
			}
		}
	}
	if len(s.pending) == 0 {
		return nil
	}
	check := map[id.RoomID]int64{}
	for room := range resp.Rooms.Join {
		if since, ok := s.pending[room]; ok {
			check[room] = since
		}
	}
	others := make([]id.RoomID, 0, len(s.pending))
	for room := range s.pending {
		if _, ok := check[room]; !ok {
			others = append(others, room)
		}
	}
	slices.Sort(others)
	for _, room := range others[:min(len(others), chunk)] {
		check[room] = s.pending[room]
	}
	return check
}

// checksPending reports whether pending rooms wait to be read back, so
// that the next /sync must not long-poll.
func (s *Source) checksPending() bool {
	s.pendingMu.Lock()
	defer s.pendingMu.Unlock()
	return len(s.pending) > 0
}

// UncommittedCheck reports whether the last answer that was read back room
// by room may not have been committed: no request has started from its
// cursor since. Dropping such an answer (a sync actor stopping or
// restarting) drops the check with it, so the next start must check again.
func (s *Source) UncommittedCheck() bool {
	c, _ := s.checked.Load().(string)
	return c != ""
}

// Next performs one /sync after prev and classifies it. Without a cursor
// (or when prev has no completed baseline) the response is a baseline: its
// timelines are recorded as anchors and never answered.
func (s *Source) Next(ctx context.Context, prev *roompb.SyncCursor) (batch *messages.SyncBatch, err error) {
	var check map[id.RoomID]int64 // the rooms this answer reads back
	defer func() { s.finish(ctx, batch, err, check) }()
	if c, _ := s.checked.Load().(string); c != "" && c == prev.GetNextBatch() {
		s.checked.Store("") // committed: this request starts from it
	}
	baseline := prev.GetNextBatch() == "" || !prev.GetBaselineDone()
	resp, err := s.request(ctx, prev, baseline)
	if err != nil {
		return nil, err
	}
	// After a failed /sync (typically a homeserver restart), the next
	// response is not trusted to hold every new event: Dendrite has been
	// seen answering an incremental /sync shortly after its start with no
	// rooms and a next_batch past events it never delivered. Every allowed
	// room is then read back from the homeserver to its last seen event.
	a := &answer{prev: prev, baseline: baseline}
	if !baseline {
		a.check = s.checkRooms(prev, resp)
		check = a.check
	}
	a.batch = s.newBatch(prev, resp.NextBatch)
	for _, rr := range s.fetchRooms(ctx, a, s.roomsToRead(resp, a.check), resp) {
		if err := s.readRoom(ctx, a, rr); err != nil {
			return nil, err
		}
	}
	return a.batch, nil
}

// fetchParallel bounds the rooms whose history is read from the homeserver
// at once while one answer is handled (back-fill of limited timelines, or
// every allowed room read back after a failed sync).
const fetchParallel = 8

// roomRead is one room of an answer: its events, fetched, before they are
// classified.
type roomRead struct {
	room   id.RoomID
	jr     *mautrix.SyncJoinedRoom
	events []*event.Event
	// skip: nothing to classify (see roomEvents); gap: the back-fill did
	// not reach the room's last seen event.
	skip, gap bool
	err       error
	// perms are the room's changes of permissions (see
	// permissionChanges), routed after its candidates.
	perms []*roompb.Candidate
}

// fetchRooms gathers the events of each room, reading the rooms that need
// their history read back from the homeserver up to fetchParallel at once
// (after a crash Lisa reads every allowed room back: one at a time,
// 10,000 rooms took seconds before the first answer). The results keep
// the order of rooms; classification then runs in that order, one room
// after another.
func (s *Source) fetchRooms(ctx context.Context, a *answer, rooms []id.RoomID, resp *mautrix.RespSync) []roomRead {
	out := make([]roomRead, len(rooms))
	sem := make(chan struct{}, fetchParallel)
	var wg sync.WaitGroup
	for i, room := range rooms {
		out[i] = roomRead{room: room, jr: resp.Rooms.Join[room]}
		rr := &out[i]
		if !s.needsRead(a, rr) {
			rr.skip = true
			continue
		}
		s.noteEncryption(room, rr.jr)
		rr.perms = s.permissionChanges(room, rr.jr)
		if !s.mustFetch(a, room, rr.jr) {
			rr.events, _, _, _ = s.roomEvents(ctx, a, room, rr.jr)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rr.events, rr.skip, rr.gap, rr.err = s.roomEvents(ctx, a, room, rr.jr)
		}()
	}
	wg.Wait()
	return out
}

// needsRead reports whether a room of the answer is one of Lisa's allowed
// rooms with something to read; others are only counted (readRoom).
func (s *Source) needsRead(a *answer, rr *roomRead) bool {
	if _, checked := a.check[rr.room]; rr.jr == nil && (!checked || !s.classifier.allowed[rr.room]) {
		return false
	}
	return s.classifier.allowed[rr.room]
}

// mustFetch reports whether roomEvents will read the room's history from
// the homeserver.
func (s *Source) mustFetch(a *answer, room id.RoomID, jr *mautrix.SyncJoinedRoom) bool {
	if a.baseline {
		return false
	}
	_, checked := a.check[room]
	return checked || (jr != nil && jr.Timeline.Limited && jr.Timeline.PrevBatch != "")
}

// answer is one /sync answer being read.
type answer struct {
	prev *roompb.SyncCursor
	// baseline: the answer only records anchors.
	baseline bool
	// check are the rooms read back from the homeserver (see
	// checkRooms), each with the UpdatedAtMs of the cursor it became
	// pending at.
	check map[id.RoomID]int64
	batch *messages.SyncBatch
}

// finish records what an answer that ended with err says about the next:
// any failure may have been the homeserver's, so the next response is
// checked room by room; a complete batch clears the check. A request Lisa
// cancelled herself to stop says nothing either way.
func (s *Source) finish(ctx context.Context, batch *messages.SyncBatch, err error, check map[id.RoomID]int64) {
	if err != nil && errors.Is(context.Cause(ctx), messages.ErrStopping) {
		return
	}
	s.verify.Store(err != nil)
	if err == nil {
		s.forgetStalls()
	}
	if err == nil && len(check) > 0 {
		s.pendingMu.Lock()
		for room := range check {
			delete(s.pending, room)
		}
		s.pendingMu.Unlock()
		s.checked.Store(batch.Cursor.GetNextBatch())
	}
}

// request performs the /sync request itself: a long poll after prev, or
// an immediate baseline.
func (s *Source) request(ctx context.Context, prev *roompb.SyncCursor, baseline bool) (*mautrix.RespSync, error) {
	req := mautrix.ReqSync{FilterID: s.filterJSON}
	if !baseline {
		req.Since = prev.GetNextBatch()
		// Rooms to read back: no long poll until they are. Nor in the
		// first request of this process: the rooms wait for its answer
		// before they start on a question queued before it (a data dir
		// older than the room may not know her replies since its cursor;
		// see room.Flights.Committed).
		if !s.checksPending() && s.answered.Load() {
			req.Timeout = int(s.opts.Timeout.Milliseconds())
		}
	}
	resp, err := s.c.cli.FullSyncRequest(ctx, req)
	if err != nil {
		return nil, classifySync(err)
	}
	s.answered.Store(true)
	if resp.NextBatch == "" {
		return nil, &messages.Error{Code: messages.CodeMatrixRejected, Message: "sync response without next_batch", Ambiguous: true}
	}
	return resp, nil
}

// newBatch starts the batch of an answer: a cursor at nextBatch that
// keeps prev's anchors until rooms replace them.
func (s *Source) newBatch(prev *roompb.SyncCursor, nextBatch string) *messages.SyncBatch {
	cur := &roompb.SyncCursor{
		NextBatch:    nextBatch,
		BaselineDone: true,
		UpdatedAtMs:  s.now().UnixMilli(),
		LastEventIds: map[string]string{},
	}
	for room, last := range prev.GetLastEventIds() {
		cur.LastEventIds[room] = last
	}
	return &messages.SyncBatch{Cursor: cur, Rejected: map[string]int{}, NotAllowed: map[string]int{}}
}

// roomsToRead lists, sorted, the rooms of resp and the rooms read back
// that it left out.
func (s *Source) roomsToRead(resp *mautrix.RespSync, check map[id.RoomID]int64) []id.RoomID {
	rooms := make([]id.RoomID, 0, len(resp.Rooms.Join))
	for room := range resp.Rooms.Join {
		rooms = append(rooms, room)
	}
	for room := range check {
		if _, ok := resp.Rooms.Join[room]; !ok {
			rooms = append(rooms, room)
		}
	}
	slices.Sort(rooms)
	return rooms
}

// readRoom adds one room of the answer to a.batch: its new last event,
// and its events classified (or, in a baseline, counted). jr is the
// room's part of the response, nil if it had none.
func (s *Source) readRoom(ctx context.Context, a *answer, rr roomRead) error {
	room, jr, events := rr.room, rr.jr, rr.events
	if jr != nil && !s.classifier.allowed[room] {
		// Dendrite ignores room filters: the allowlist is enforced here.
		a.batch.Rejected[string(RejectRoom)] += len(jr.Timeline.Events)
		if n := len(jr.Timeline.Events); n > 0 {
			a.batch.NotAllowed[string(room)] += n
		}
		return nil
	}
	if rr.err != nil || rr.skip {
		return rr.err
	}
	if rr.gap {
		a.batch.GapRooms = append(a.batch.GapRooms, messages.RoomID(room))
	}
	// The anchor back-fill must meet is the newest event of the types it
	// reads: a server that ignores the timeline filter's types in /sync
	// (Continuwuity, conduwuit; docs/homeservers.md) can end a timeline
	// with a reaction, which a filtered /messages never shows. Without
	// such an event the previous anchor stays (older: back-fill reads
	// more, never less).
	if last := lastOfTypes(events, timelineTypes); last != "" {
		a.batch.Cursor.LastEventIds[string(room)] = last
	}
	if a.baseline {
		a.batch.Rejected["baseline"] += len(events)
		for _, evt := range events {
			a.batch.Seen = append(a.batch.Seen, seenEvent(room, evt, VerdictBaseline))
		}
		return nil
	}
	if err := s.classifyRoom(ctx, a.batch, room, events); err != nil {
		return err
	}
	a.batch.Candidates = append(a.batch.Candidates, rr.perms...)
	return nil
}

// noteEncryption reports an allowed room whose sync answer shows it
// encrypted, and takes the encryption events out of its timeline: they are
// no messages, and one must not become the room's back-fill anchor
// (back-fill reads only timelineTypes).
func (s *Source) noteEncryption(room id.RoomID, jr *mautrix.SyncJoinedRoom) {
	if jr == nil {
		return
	}
	found := slices.ContainsFunc(jr.State.Events, IsEncryptionEvent) || slices.ContainsFunc(jr.Timeline.Events, IsEncryptionEvent)
	if !found {
		return
	}
	jr.Timeline.Events = slices.DeleteFunc(slices.Clone(jr.Timeline.Events), IsEncryptionEvent)
	if s.opts.OnEncrypted != nil {
		s.opts.OnEncrypted(string(room))
	}
}

// permissionChanges returns, as inbox candidates, the changes of an
// allowed room's power levels and of Lisa's own membership in its sync
// answer (state and timeline, each event once), and takes every power
// levels and membership event out of its timeline: they are no messages,
// and one must not become the room's back-fill anchor (back-fill reads
// only timelineTypes). The room releases the replies it holds after an
// M_FORBIDDEN when one arrives; with none held it only clears it out.
// Other members' membership events are dropped.
func (s *Source) permissionChanges(room id.RoomID, jr *mautrix.SyncJoinedRoom) []*roompb.Candidate {
	if jr == nil {
		return nil
	}
	var out []*roompb.Candidate
	seen := map[id.EventID]bool{}
	for _, list := range [][]*event.Event{jr.State.Events, jr.Timeline.Events} {
		for _, evt := range list {
			trigger := s.permissionTrigger(evt)
			if trigger == "" || evt.ID == "" || seen[evt.ID] {
				continue
			}
			seen[evt.ID] = true
			out = append(out, &roompb.Candidate{RoomId: string(room), EventId: string(evt.ID), Sender: string(evt.Sender),
				OriginTsMs: evt.Timestamp, Trigger: trigger})
		}
	}
	if slices.ContainsFunc(jr.Timeline.Events, isPermissionEvent) {
		jr.Timeline.Events = slices.DeleteFunc(slices.Clone(jr.Timeline.Events), isPermissionEvent)
	}
	return out
}

// permissionTrigger returns the trigger of a permission change (see
// permissionChanges), or "" for any other event.
func (s *Source) permissionTrigger(evt *event.Event) string {
	switch {
	case evt == nil || evt.StateKey == nil:
		return ""
	case evt.Type.Type == event.StatePowerLevels.Type && *evt.StateKey == "":
		return messages.TriggerPowerLevels
	case evt.Type.Type == event.StateMember.Type && *evt.StateKey == string(s.c.cli.UserID):
		return messages.TriggerMembership
	}
	return ""
}

// isPermissionEvent reports a power levels or membership event, which
// permissionChanges takes out of a timeline.
func isPermissionEvent(evt *event.Event) bool {
	return evt != nil && (evt.Type.Type == event.StatePowerLevels.Type || evt.Type.Type == event.StateMember.Type)
}

// roomEvents returns the room's new events, oldest first: its timeline,
// with what a limited timeline left out filled back, and a room being
// verified read back from the newest event. skip is set for an allowed
// room that cannot be read back and sent nothing.
func (s *Source) roomEvents(ctx context.Context, a *answer, room id.RoomID, jr *mautrix.SyncJoinedRoom) (events []*event.Event, skip, gap bool, err error) {
	from := ""
	if jr != nil {
		events = jr.Timeline.Events
		if jr.Timeline.Limited {
			from = jr.Timeline.PrevBatch
		}
		if i := anchorAt(a, room, events); i >= 0 {
			// An answer after the cursor never holds the room's last
			// seen event: this one is not incremental (the Conduit
			// family answers a since it cannot parse with an initial
			// sync, docs/homeservers.md). That event and those before
			// it were seen; the gap to it is closed.
			s.log.Warn("sync answer repeats the room's last seen event; only the events after it are new",
				"room", messages.RoomID(room), "repeated", i+1)
			events, from = events[i+1:], ""
		}
	}
	since, checked := a.check[room]
	if !checked {
		since = a.prev.GetUpdatedAtMs()
	}
	if a.baseline || (from == "" && !checked) {
		return events, false, false, nil
	}
	// A limited timeline is filled back from its start; a room being
	// verified is read back from the newest event.
	anchor := a.prev.GetLastEventIds()[string(room)]
	recovered, closed, err := s.backfill(ctx, room, from, anchor)
	var le *messages.Error
	if err != nil && jr == nil && errors.As(err, &le) && le.Permanent {
		// An allowed room Lisa has not joined (yet) cannot be read
		// back; it has nothing to hide either.
		s.log.Warn("allowed room could not be read back after a failed sync; skipped", "room", messages.RoomID(room), "code", le.Code)
		return nil, true, false, nil
	}
	if err != nil {
		return nil, false, false, err
	}
	if !closed || anchor == "" {
		// Unseen is not the same as old (a room Lisa has seen nothing of
		// yet may have a long history): keep only what arrived after the
		// previous commit.
		// A room read back answers after it became pending goes by
		// the cursor of that moment.
		recovered = slices.DeleteFunc(recovered, func(e *event.Event) bool { return e.Timestamp < since })
	}
	return mergeByID(recovered, events), false, !closed, nil
}

// anchorAt is the index in events of room's last seen event (the
// cursor's anchor), or -1; always -1 in a baseline.
func anchorAt(a *answer, room id.RoomID, events []*event.Event) int {
	anchor := a.prev.GetLastEventIds()[string(room)]
	if a.baseline || anchor == "" {
		return -1
	}
	return slices.IndexFunc(events, func(e *event.Event) bool { return e != nil && string(e.ID) == anchor })
}

// classifyRoom classifies a room's new events into batch: Lisa's own
// events, candidates (with the events before them as context) and
// rejections by verdict.
func (s *Source) classifyRoom(ctx context.Context, batch *messages.SyncBatch, room id.RoomID, events []*event.Event) error {
	routed := map[string]bool{} // this answer's candidates, not yet in the ledger
	for i, evt := range events {
		if evt.Sender == s.c.cli.UserID && evt.Type == event.EventMessage {
			batch.OwnEvents = append(batch.OwnEvents, ownEvent(room, evt))
		}
		cand, verdict := s.classify(ctx, room, evt, routed)
		switch verdict {
		case RejectReplyLookup:
			if !s.stalled(ctx, room, evt.ID) {
				// Unknown is not "no": fail the whole response so the
				// cursor stays put and the event is classified again.
				return &messages.Error{Code: messages.CodeMatrixUnavailable, Message: "could not check the target of a reply", Ambiguous: true}
			}
			verdict = RejectReplyLookupAbandoned
			s.log.Error("the target of a reply could not be checked for too long; taken as not a reply to Lisa so that the sync can go on",
				"room", messages.RoomID(room), "event", messages.EventID(evt.ID),
				"failed_answers", replyLookupStallAnswers, "after", replyLookupStallTime)
		case RejectReplyTargetInvalid:
			s.log.Info("a reply names no valid event ID; taken as not a reply to Lisa",
				"room", messages.RoomID(room), "event", messages.EventID(evt.ID))
		}
		batch.Seen = append(batch.Seen, seenEvent(room, evt, verdict))
		if cand == nil {
			batch.Rejected[string(verdict)]++
			continue
		}
		routed[cand.GetEventId()] = true
		if cand.GetRedactsEventId() == "" {
			cand.BatchEvents = batchContext(events[:i])
		}
		batch.Candidates = append(batch.Candidates, cand)
	}
	return nil
}

// backfill pages backwards from prevBatch (the newest event if empty) until it meets anchor or runs
// out of pages. It returns the recovered events oldest first and whether
// the gap was closed. When the read took more than one page it reads the
// gap again in pages of another size and merges the two: Dendrite's next
// page skips the events that share their depth with a page's last event
// but were not on it (see scanPageSizes), and a skipped event in a gap
// would be a lost mention.
func (s *Source) backfill(ctx context.Context, room id.RoomID, prevBatch, anchor string) ([]*event.Event, bool, error) {
	out, closed, crossed, err := s.backfillPass(ctx, room, prevBatch, anchor, s.opts.TimelineLimit)
	if err != nil {
		return nil, false, err
	}
	if crossed {
		again, closedAgain, _, err := s.backfillPass(ctx, room, prevBatch, anchor, secondPageSize(s.opts.TimelineLimit))
		if err != nil {
			return nil, false, err
		}
		out, closed = mergeOrdered(out, again), closed || closedAgain
	}
	if !closed {
		s.log.Warn("matrix_timeline_gap", "room", messages.RoomID(room), "pages", s.opts.GapPageLimit)
	}
	return out, closed, nil
}

// secondPageSize is the page size of a second read of the same history:
// about 3/5 of the first (61 for 100, as in scanPageSizes), never equal
// to it, so that pages rarely end at the same depth.
func secondPageSize(size int) int {
	if size <= 2 {
		return size + 1
	}
	return size*3/5 + 1
}

// backfillPass is one backward read of a gap in pages of size; crossed
// reports that it went past its first page.
func (s *Source) backfillPass(ctx context.Context, room id.RoomID, prevBatch, anchor string, size int) (out []*event.Event, closed, crossed bool, err error) {
	from := prevBatch
	for page := range s.opts.GapPageLimit {
		crossed = page > 0
		var resp *mautrix.RespMessages
		err := s.read(ctx, func() (err error) {
			resp, err = s.c.cli.Messages(ctx, room, from, "", mautrix.DirectionBackward,
				&mautrix.FilterPart{Types: timelineTypes}, size)
			return err
		})
		if err != nil {
			return nil, false, crossed, err
		}
		for _, evt := range resp.Chunk {
			if anchor != "" && string(evt.ID) == anchor {
				slices.Reverse(out)
				return out, true, crossed, nil
			}
			out = append(out, evt)
		}
		if resp.End == "" || len(resp.Chunk) == 0 {
			// The start of the room: nothing is missing.
			slices.Reverse(out)
			return out, true, crossed, nil
		}
		from = resp.End
	}
	slices.Reverse(out)
	return out, false, true, nil
}

// mergeOrdered merges two reads of the same history, each oldest first
// and each perhaps missing events the other has, into one list without
// repeats: the events both hold keep their common order, and an event
// only one holds goes where that read has it.
func mergeOrdered(a, b []*event.Event) []*event.Event {
	inA, inB := map[id.EventID]bool{}, map[id.EventID]bool{}
	for _, e := range a {
		inA[e.ID] = true
	}
	for _, e := range b {
		inB[e.ID] = true
	}
	out := make([]*event.Event, 0, max(len(a), len(b)))
	done := map[id.EventID]bool{}
	emit := func(e *event.Event) {
		if !done[e.ID] {
			done[e.ID] = true
			out = append(out, e)
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i == len(a):
			emit(b[j])
			j++
		case j == len(b):
			emit(a[i])
			i++
		case a[i].ID == b[j].ID:
			emit(a[i])
			i, j = i+1, j+1
		case !inB[a[i].ID]:
			emit(a[i])
			i++
		case !inA[b[j].ID]:
			emit(b[j])
			j++
		default: // the reads disagree on order: the first read's wins
			emit(a[i])
			i++
		}
	}
	return out
}

// Bounds of the sync-batch context kept with a candidate.
const (
	batchContextEvents = 20
	batchContextBytes  = 64 << 10
)

// batchContext keeps the raw JSON of the newest events before a candidate,
// oldest first, within batchContextEvents and batchContextBytes.
func batchContext(before []*event.Event) [][]byte {
	var out [][]byte
	total := 0
	for i := len(before) - 1; i >= 0 && len(out) < batchContextEvents; i-- {
		raw, err := json.Marshal(before[i])
		if err != nil || total+len(raw) > batchContextBytes {
			break
		}
		total += len(raw)
		out = append(out, raw)
	}
	slices.Reverse(out)
	return out
}

// mergeByID joins recovered and timeline events in server order, dropping
// repeats.
func mergeByID(recovered, timeline []*event.Event) []*event.Event {
	seen := map[id.EventID]bool{}
	var out []*event.Event
	for _, list := range [][]*event.Event{recovered, timeline} {
		for _, e := range list {
			if e == nil || seen[e.ID] {
				continue
			}
			seen[e.ID] = true
			out = append(out, e)
		}
	}
	return out
}

// isLisa checks the bot-event ledger, then asks the homeserver (a
// ReplyChecker). How the homeserver's answer is taken:
//
//   - 200 with the event: Lisa's if she sent it in room;
//   - M_NOT_FOUND or M_FORBIDDEN (whatever the status): the event is not
//     visible to Lisa, so not hers;
//   - any other 4xx except 401, 408 and 429 (400 M_INVALID_PARAM, 404
//     M_UNRECOGNIZED, 405, 413, 414 from a proxy, …): a permanent refusal
//     that asking again cannot change; logged, and returned wrapping
//     ErrReplyTargetRejected at once, with no repeat;
//   - 408 and 429, 5xx, an unreadable answer, a network error, a request
//     that timed out: transient; repeated in place by read, then
//     returned, failing the answer (see replyLookupStallAnswers for the
//     bound). 401 is transient too: it is about Lisa's access token, not
//     the event, and taking it for "not hers" would drop every reply in
//     an answer read just before the token was revoked.
func (s *Source) isLisa(ctx context.Context, room, eventID string) (bool, error) {
	if !validEventID(eventID) {
		return false, fmt.Errorf("%w: not an event ID", ErrReplyTargetRejected)
	}
	if ok, err := s.ledger.IsBotEvent(room, eventID); err != nil {
		return false, err
	} else if ok {
		return true, nil
	}
	var evt *event.Event
	err := s.read(ctx, func() (err error) {
		evt, err = s.c.cli.GetEvent(ctx, id.RoomID(room), id.EventID(eventID))
		return lookupError(err)
	})
	if errors.Is(err, errNotLisas) {
		return false, nil
	}
	if errors.Is(err, ErrReplyTargetRejected) {
		s.log.Warn("homeserver refused to look up the target of a reply; taken as not a reply to Lisa",
			"room", messages.RoomID(room), "target", messages.EventID(eventID), "error", err)
		return false, err
	}
	if err != nil {
		return false, err
	}
	if evt == nil {
		return false, nil // "null": nothing to show Lisa
	}
	return evt.Sender == s.c.cli.UserID && (evt.RoomID == "" || evt.RoomID == id.RoomID(room)), nil
}

// errNotLisas ends a reply lookup whose target the homeserver does not
// show Lisa: it is not hers.
var errNotLisas = errors.New("matrix: the replied-to event is not visible")

// lookupError sorts the error of GET /event for isLisa: errNotLisas, an
// error wrapping ErrReplyTargetRejected, or a transient error (for read to
// repeat).
func lookupError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, mautrix.MNotFound) || errors.Is(err, mautrix.MForbidden) {
		return errNotLisas
	}
	var herr mautrix.HTTPError
	if !errors.As(err, &herr) || herr.Response == nil {
		return err
	}
	status, code := herr.Response.StatusCode, ""
	if herr.RespError != nil {
		code = herr.RespError.ErrCode
	}
	switch {
	case status == http.StatusRequestTimeout:
		// Classify calls every 4xx but 401 and 429 permanent; a 408 says
		// the server gave up waiting, which may not happen again.
		return &messages.Error{Code: messages.CodeMatrixUnavailable, Message: "homeserver timed out the request (408)", Ambiguous: true}
	case status >= 400 && status < 500 && status != http.StatusUnauthorized && status != http.StatusTooManyRequests:
		return fmt.Errorf("%w (%d %s)", ErrReplyTargetRejected, status, code)
	}
	return err
}

// read runs one idempotent read, repeating it after a transient failure
// (up to readAttempts, with a doubling pause, or the homeserver's
// retry_after_ms when it names one, capped at maxReadRetryWait). A
// permanent failure, errNotLisas, ErrReplyTargetRejected and the end of
// ctx are returned at once. The error returned is classified, except the
// two sentinels, which are returned as they are.
func (s *Source) read(ctx context.Context, do func() error) error {
	base := s.opts.ReadRetryDelay
	if base <= 0 {
		base = DefaultReadRetryDelay
	}
	pause := backoff.Policy{Base: base, Max: maxReadRetryWait, MaxRetryAfter: maxReadRetryWait}
	for attempt := 1; ; attempt++ {
		err := do()
		if err == nil || errors.Is(err, errNotLisas) || errors.Is(err, ErrReplyTargetRejected) {
			return err
		}
		le := Classify(err)
		if le.Permanent || attempt >= readAttempts || ctx.Err() != nil {
			return le
		}
		wait := pause.Delay(attempt, le.RetryAfter)
		s.log.Debug("homeserver read failed; repeating it", "code", le.Code, "attempt", attempt, "wait_ms", wait.Milliseconds())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return le
		case <-t.C:
		}
	}
}

// VerdictBaseline is the verdict recorded in SyncBatch.Seen for an event
// of the baseline answer: history, never answered.
const VerdictBaseline Verdict = "baseline"

// seenEvent describes evt for the event trail: IDs, sender, kind and
// verdict, never its body.
func seenEvent(room id.RoomID, evt *event.Event, v Verdict) messages.SeenEvent {
	se := messages.SeenEvent{Room: string(room), Verdict: string(v)}
	if evt == nil {
		return se
	}
	se.EventID, se.Sender, se.OriginTsMs, se.Kind = string(evt.ID), string(evt.Sender), evt.Timestamp, eventKind(evt)
	return se
}

// eventKind names what evt is: "edit", "redaction", a message of one of
// the specification's types without "m." ("text", "notice", …),
// "message" for any other type, or "other". The set is closed: a sender's
// own msgtype never reaches the trail.
func eventKind(evt *event.Event) string {
	switch {
	case evt.Type == event.EventRedaction:
		return "redaction"
	case IsEdit(evt):
		return "edit"
	case evt.Type != event.EventMessage:
		return "other"
	}
	var c struct {
		MsgType string `json:"msgtype"`
	}
	if json.Unmarshal(evt.Content.VeryRaw, &c) != nil || c.MsgType == "" {
		if msg, ok := evt.Content.Parsed.(*event.MessageEventContent); ok && msg != nil {
			c.MsgType = string(msg.MsgType)
		}
	}
	if c.MsgType == "" {
		return "message"
	}
	switch k, _ := strings.CutPrefix(c.MsgType, "m."); k {
	case "text", "notice", "emote", "image", "file", "audio", "video", "location":
		return k
	}
	return "message"
}

func ownEvent(room id.RoomID, evt *event.Event) messages.OwnEvent {
	oe := messages.OwnEvent{Room: messages.RoomID(room), EventID: messages.EventID(evt.ID), TransactionID: messages.TxnID(evt.Unsigned.TransactionID)}
	var c struct {
		RelatesTo struct {
			InReplyTo struct {
				EventID string `json:"event_id"`
			} `json:"m.in_reply_to"`
		} `json:"m.relates_to"`
		// Invocation is the event the reply answers (render.InvocationKey);
		// it names it also where the reply relation does not.
		Invocation string `json:"org.lisabot.invocation"`
	}
	if json.Unmarshal(evt.Content.VeryRaw, &c) == nil {
		oe.InReplyTo = messages.EventID(c.RelatesTo.InReplyTo.EventID)
		if v := c.Invocation; v != "" && validEventID(v) {
			oe.InReplyTo = messages.EventID(v)
		}
	}
	if !validEventID(string(oe.InReplyTo)) {
		oe.InReplyTo = ""
	}
	return oe
}

// classifySync adds cursor rejection to Classify: a homeserver that no
// longer accepts the since token needs a new baseline, not retries. The
// servers say so differently: the spec's M_UNKNOWN_POS; Dendrite v0.13.8
// 400 M_INVALID_PARAM "malformed sync token"; Synapse 1.67.0 400 M_UNKNOWN
// "Invalid stream token" (StreamToken.from_string, synapse/types.py,
// raises SynapseError without an errcode). Taken for a plain rejection,
// Synapse's answer would have the syncer retry the same cursor forever.
func classifySync(err error) *messages.Error {
	var herr mautrix.HTTPError
	if errors.As(err, &herr) && herr.RespError != nil && herr.Response != nil && herr.Response.StatusCode == 400 {
		code, msg := herr.RespError.ErrCode, strings.ToLower(herr.RespError.Err)
		if code == "M_UNKNOWN_POS" || (code == "M_INVALID_PARAM" && strings.Contains(msg, "token")) ||
			(code == "M_UNKNOWN" && strings.Contains(msg, "stream token")) {
			return &messages.Error{Code: messages.CodeCursorRejected, Message: fmt.Sprintf("homeserver rejected the sync cursor (%s)", code), Permanent: true}
		}
	}
	return Classify(err)
}
