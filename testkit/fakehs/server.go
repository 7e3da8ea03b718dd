package fakehs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxBody bounds the request body the fake reads.
const maxBody = 1 << 20

// Options configures a [Server].
type Options struct {
	// UserID, DeviceID and Token are the bot's account: the only access
	// token the fake accepts.
	UserID, DeviceID, Token string
	// Now is the clock for event timestamps and arrival times; time.Now
	// when nil. It must be safe for concurrent use.
	Now func() time.Time
	// OnSend, if set, is called for every PUT send that stores a new
	// event, before the response is written, with the instant the request
	// arrived. It must not block for long.
	OnSend func(Send)
	// OnRequest, if set, is called when a request reaches an endpoint
	// ("sync" when a /sync response is about to be written, else when the
	// request arrives) with the room it concerns ("" for none). It must
	// not block for long.
	OnRequest func(endpoint, room string, at time.Time)
	// IgnoreSyncTimelineTypes makes /sync ignore the timeline filter's
	// types (and senders), as Continuwuity and conduwuit do (see
	// docs/homeservers.md, "/sync"): a reaction or state event can be the
	// last event of a room's timeline. /messages still honours them.
	IgnoreSyncTimelineTypes bool
	// Txn is how send transaction IDs are kept; the zero value keeps them
	// per device, for ever, across Restart (Continuwuity).
	Txn TxnPolicy
	// SendRateLimit, if set, answers sends beyond a token bucket with 429
	// M_LIMIT_EXCEEDED, as Synapse's rc_message does.
	SendRateLimit *RateLimit
	// Sync modes of the Conduit family (docs/homeservers.md, "/sync").
	Sync SyncModes
	// Identity is what the server says it is (Server header, federation
	// version, a server_version endpoint); Proxy, if set, is a reverse
	// proxy in front of it.
	Identity Identity
	Proxy    *Proxy
	// Relations are the /relations modes.
	Relations RelationsModes
}

// Send is a reply that arrived by PUT /send.
type Send struct {
	Room    string
	EventID string
	TxnID   string
	Content json.RawMessage
	// At is when the request reached the fake, before its body was read.
	At time.Time
}

// Event is one stored timeline event.
type Event struct {
	pos     int64
	Room    string
	ID      string
	Sender  string
	Type    string
	TS      int64
	Content json.RawMessage
	TxnID   string

	wire []byte // the event with its room ID, encoded once (under Server.mu)
}

type room struct {
	members map[string]string // user ID -> display name
	events  []*Event
}

// Server is the fake homeserver. All methods are safe for concurrent use.
type Server struct {
	opts Options

	mu    sync.Mutex
	rooms map[string]*room
	byID  map[string]*Event
	log   []*Event            // the stream; an event's pos is its index + 1
	txns  map[string]txnEntry // scope + txn ID -> the event it made
	token string              // the access token accepted now (SetToken)
	// sendFaults are scripted send faults still to inject, oldest first.
	sendFaults []SendFault
	bucket     bucket
	hidden     map[string]bool        // event IDs /relations filters out (HideFromRelations)
	sendDelays []time.Duration        // scripted delays of the next sends (DelaySends)
	roomLocks  map[string]*sync.Mutex // per room: lookup, append and mapping of a send
	restarted  chan struct{}          // closed and replaced by Restart
	parked     map[int64]int          // since -> /sync requests waiting at it
	counts     map[string]int         // requests per endpoint
	changed    chan struct{}          // closed and replaced on every change
	nextID     int64
	// failSyncs and skipSyncs are /sync faults still to inject.
	failSyncs, skipSyncs int
	// failMessages counts GET /messages requests still to fail.
	failMessages int
	// eventAnswers are scripted answers to GET /event, by event ID.
	eventAnswers map[string]*eventAnswer

	life   sync.Mutex // guards hs, addr and served across Restart and Close
	hs     *http.Server
	addr   string
	url    string
	served chan struct{}
	done   chan struct{}
	closed bool
	close  sync.Once
}

// New returns an unstarted server; call [Server.Listen].
func New(o Options) *Server {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Server{
		opts:      o,
		rooms:     map[string]*room{},
		byID:      map[string]*Event{},
		txns:      map[string]txnEntry{},
		token:     o.Token,
		hidden:    map[string]bool{},
		roomLocks: map[string]*sync.Mutex{},
		restarted: make(chan struct{}),
		parked:    map[int64]int{},
		counts:    map[string]int{},
		changed:   make(chan struct{}),
		done:      make(chan struct{}),
	}
}

// Listen starts serving on a random port of 127.0.0.1.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("fakehs: listen: %w", err)
	}
	s.life.Lock()
	defer s.life.Unlock()
	s.addr = ln.Addr().String()
	s.url = "http://" + s.addr
	s.serveLocked(ln)
	return nil
}

// serveLocked serves on ln; call with s.life held.
func (s *Server) serveLocked(ln net.Listener) {
	s.hs = &http.Server{Handler: s.identify(s.mux()), ReadHeaderTimeout: 10 * time.Second}
	s.served = make(chan struct{})
	hs, served := s.hs, s.served
	go func() {
		defer close(served)
		_ = hs.Serve(ln)
	}()
}

func (s *Server) mux() *http.ServeMux {
	mux := http.NewServeMux()
	const p = "/_matrix/client/v3"
	mux.HandleFunc("GET /_matrix/client/versions", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"versions": []string{"v1.11"}})
	})
	mux.HandleFunc("GET "+p+"/account/whoami", s.auth("whoami", s.whoami))
	mux.HandleFunc("GET "+p+"/sync", s.auth("sync", s.sync))
	mux.HandleFunc("PUT "+p+"/rooms/{room}/send/{type}/{txn}", s.sendHandler)
	mux.HandleFunc("GET "+p+"/rooms/{room}/event/{event}", s.auth("event", s.event))
	mux.HandleFunc("GET "+p+"/rooms/{room}/context/{event}", s.auth("context", s.context))
	mux.HandleFunc("GET "+p+"/rooms/{room}/messages", s.auth("messages", s.messages))
	mux.HandleFunc("GET "+p+"/rooms/{room}/joined_members", s.auth("joined_members", s.joinedMembers))
	mux.HandleFunc("PUT "+p+"/rooms/{room}/typing/{user}", s.auth("typing", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxBody))
		writeJSON(w, http.StatusOK, map[string]any{})
	}))
	mux.HandleFunc("GET /_matrix/client/v1/rooms/{room}/relations/{event}/{relType}", s.auth("relations", s.relations))
	mux.HandleFunc("GET /_matrix/federation/v1/version", s.federationVersion)
	if p := s.opts.Identity.ServerVersionPath; p != "" {
		mux.HandleFunc("GET "+p, s.serverVersion)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeErr(w, http.StatusNotFound, "M_UNRECOGNIZED", "unrecognized request")
	})
	return mux
}

// URL returns the homeserver base URL, or "" before Listen. It stays the
// same across Restart.
func (s *Server) URL() string {
	s.life.Lock()
	defer s.life.Unlock()
	return s.url
}

// Close stops the server and waits for it; parked /sync requests end at
// once. It is idempotent.
func (s *Server) Close() {
	s.close.Do(func() {
		close(s.done)
		s.life.Lock()
		defer s.life.Unlock()
		s.closed = true
		if s.hs != nil {
			_ = s.hs.Close()
			<-s.served
		}
	})
}

// CreateRoom adds a room with the bot and members (user ID -> display
// name) joined. Creating an existing room adds the members.
func (s *Server) CreateRoom(id string, members map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rooms[id]
	if r == nil {
		r = &room{members: map[string]string{s.opts.UserID: "Lisa"}}
		s.rooms[id] = r
	}
	for u, name := range members {
		r.members[u] = name
	}
}

// Post stores a message from sender in room and returns its event ID and
// the instant it became deliverable to /sync.
func (s *Server) Post(roomID, sender string, content any) (string, time.Time, error) {
	return s.PostEvent(roomID, sender, "m.room.message", content)
}

// PostEvent stores an event of type typ (a message, a reaction) from
// sender in room, like Post.
func (s *Server) PostEvent(roomID, sender, typ string, content any) (string, time.Time, error) {
	raw, err := json.Marshal(content)
	if err != nil {
		return "", time.Time{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ev, err := s.appendLocked(roomID, sender, typ, raw, "")
	if err != nil {
		return "", time.Time{}, err
	}
	return ev.ID, s.opts.Now(), nil
}

// FailSyncs makes the next n /sync requests fail with 502, as a homeserver
// restarting behind a reverse proxy does.
func (s *Server) FailSyncs(n int) {
	s.mu.Lock()
	s.failSyncs += n
	s.mu.Unlock()
}

// FailMessages makes the next n GET /messages requests fail with 503, as
// a homeserver that is restarting or overloaded does.
func (s *Server) FailMessages(n int) {
	s.mu.Lock()
	s.failMessages += n
	s.mu.Unlock()
}

// eventAnswer is a scripted answer to GET /event.
type eventAnswer struct {
	status int
	body   string
	n      int // answers left; negative for all
}

// AnswerEvent makes the next n GET /event requests for eventID, in any
// room, answer status with body instead of the event, as a homeserver or
// a reverse proxy refusing or failing on that ID does (400 M_INVALID_PARAM,
// 414 from a proxy, a 500 that never goes away). The body is sent as is:
// as application/json when it is valid JSON, else as text/html. A negative
// n scripts every request until the next call; n == 0 removes the script.
func (s *Server) AnswerEvent(eventID string, status int, body string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n == 0 {
		delete(s.eventAnswers, eventID)
		return
	}
	if s.eventAnswers == nil {
		s.eventAnswers = map[string]*eventAnswer{}
	}
	s.eventAnswers[eventID] = &eventAnswer{status: status, body: body, n: n}
}

// SkipSyncs makes the next n incremental /sync requests answer at once with
// no rooms and a next_batch past every stored event, as Dendrite was seen
// doing just after its start: the events in between are never delivered.
func (s *Server) SkipSyncs(n int) {
	s.mu.Lock()
	s.skipSyncs += n
	s.mu.Unlock()
}

// Events returns a copy of room's timeline, oldest first.
func (s *Server) Events(roomID string) []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rooms[roomID]
	if r == nil {
		return nil
	}
	out := make([]Event, len(r.events))
	for i, e := range r.events {
		out[i] = *e
	}
	return out
}

// Head returns the since token of the current end of the stream: a
// /sync from it returns only what is posted afterwards.
func (s *Server) Head() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return token(int64(len(s.log)))
}

// Counts returns how many requests each endpoint served.
func (s *Server) Counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}

// WaitParked waits until a /sync request is waiting at the head of the
// stream: anything posted now is delivered at once.
func (s *Server) WaitParked(ctx context.Context) error {
	for {
		s.mu.Lock()
		ok := s.parked[int64(len(s.log))] > 0
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return errors.New("fakehs: closed")
		case <-ch:
		}
	}
}

func (s *Server) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) appendLocked(roomID, sender, typ string, content json.RawMessage, txn string) (*Event, error) {
	r := s.rooms[roomID]
	if r == nil {
		return nil, fmt.Errorf("fakehs: no room %s", roomID)
	}
	s.nextID++
	ev := &Event{
		pos: int64(len(s.log)) + 1, Room: roomID, ID: fmt.Sprintf("$e%d_%s", s.nextID, strings.TrimPrefix(hostOf(roomID), ":")),
		Sender: sender, Type: typ, TS: s.opts.Now().UnixMilli(), Content: content, TxnID: txn,
	}
	s.log = append(s.log, ev)
	r.events = append(r.events, ev)
	s.byID[ev.ID] = ev
	s.broadcastLocked()
	return ev, nil
}

func hostOf(roomID string) string {
	if i := strings.IndexByte(roomID, ':'); i >= 0 {
		return roomID[i+1:]
	}
	return "fake"
}

// auth checks the access token and counts the request under name.
func (s *Server) auth(name string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			writeErr(w, http.StatusUnauthorized, "M_UNKNOWN_TOKEN", "unknown access token")
			return
		}
		s.mu.Lock()
		s.counts[name]++
		s.mu.Unlock()
		if s.opts.OnRequest != nil && name != "sync" {
			s.opts.OnRequest(name, r.PathValue("room"), s.opts.Now())
		}
		next(w, r)
	}
}

func (s *Server) authorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		tok = r.URL.Query().Get("access_token")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return tok != "" && tok == s.token
}

// whoami answers with the account; without a device (an appservice's
// token) device_id is omitted, as Continuwuity (whoami_route,
// src/api/client/account/mod.rs) and Synapse (WhoamiRestServlet,
// synapse/rest/client/account.py) omit it.
func (s *Server) whoami(w http.ResponseWriter, _ *http.Request) {
	m := map[string]any{"user_id": s.opts.UserID}
	if s.opts.DeviceID != "" {
		m["device_id"] = s.opts.DeviceID
	}
	writeJSON(w, http.StatusOK, m)
}

// wireJSON is wireEvent(e, true) encoded, kept on e: GET /context sends
// the same events again at every invocation, and re-encoding them made the
// fake compete with Lisa for the CPU in the benchmark. Call with s.mu held.
func (s *Server) wireJSON(e *Event) []byte {
	if e.wire == nil {
		b, err := json.Marshal(s.wireEvent(e, true))
		if err != nil {
			b = []byte(`{}`)
		}
		e.wire = b
	}
	return e.wire
}

// wireEvent is an event in the client-server format.
func (s *Server) wireEvent(e *Event, withRoom bool) map[string]any {
	m := map[string]any{
		"type": e.Type, "event_id": e.ID, "sender": e.Sender,
		"origin_server_ts": e.TS, "content": e.Content,
	}
	if withRoom {
		m["room_id"] = e.Room
	}
	if e.TxnID != "" {
		m["unsigned"] = map[string]any{"transaction_id": e.TxnID}
	}
	return m
}

// timelineFilter is the part of a filter the fake honours.
type timelineFilter struct {
	Limit   int      `json:"limit"`
	Types   []string `json:"types"`
	Senders []string `json:"senders"`
}

func (f timelineFilter) match(e *Event) bool {
	if len(f.Types) > 0 && !contains(f.Types, e.Type) {
		return false
	}
	return len(f.Senders) == 0 || contains(f.Senders, e.Sender)
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v || x == "*" {
			return true
		}
	}
	return false
}

func parseToken(tok string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimPrefix(tok, "s"), 10, 64)
	return n, err == nil && strings.HasPrefix(tok, "s") && n >= 0
}

func token(pos int64) string { return "s" + strconv.FormatInt(pos, 10) }

// sync serves GET /sync: an injected failure or skip if one is armed, else
// the events after since (long-polling for them), per room.
func (s *Server) sync(w http.ResponseWriter, r *http.Request) {
	tl, since, timeout, ok := s.parseSyncQuery(w, r)
	if !ok {
		return
	}
	if s.opts.IgnoreSyncTimelineTypes {
		tl.Types, tl.Senders = nil, nil
	}
	if n := s.opts.Sync.FixedTimelineLimit; n > 0 {
		tl.Limit = n
	}
	s.mu.Lock()
	if s.failSyncs > 0 {
		s.failSyncs--
		s.mu.Unlock()
		writeErr(w, http.StatusBadGateway, "M_UNKNOWN", "fakehs: injected /sync failure")
		return
	}
	if s.skipSyncs > 0 && since >= 0 {
		// Dendrite's fault: an empty answer whose next_batch passes
		// events it never delivered.
		s.skipSyncs--
		head := int64(len(s.log))
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"next_batch": token(head), "rooms": map[string]any{}})
		return
	}
	if since > int64(len(s.log)) {
		switch s.opts.Sync.AheadSince {
		case AheadSinceEmpty:
			head := int64(len(s.log))
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, map[string]any{"next_batch": token(head), "rooms": map[string]any{}})
			return
		case AheadSinceClamp:
			since = int64(len(s.log))
		default:
			s.mu.Unlock()
			writeErr(w, http.StatusBadRequest, "M_UNKNOWN_POS", "unknown since token")
			return
		}
	}
	if since >= 0 && since == int64(len(s.log)) && timeout > 0 {
		s.parkLocked(r, since, timeout)
	}
	head := int64(len(s.log))
	join := s.joinedLocked(since, head, tl)
	s.mu.Unlock()
	if s.opts.OnRequest != nil {
		for room := range join {
			s.opts.OnRequest("sync", room, s.opts.Now())
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"next_batch": token(head), "rooms": map[string]any{"join": join}})
}

// parseSyncQuery reads a /sync request's timeline filter, since token
// (-1 for none) and timeout in milliseconds. On a bad request it answers
// it and reports false.
func (s *Server) parseSyncQuery(w http.ResponseWriter, r *http.Request) (tl timelineFilter, since int64, timeout int, ok bool) {
	q := r.URL.Query()
	var filter struct {
		Room struct {
			Timeline timelineFilter `json:"timeline"`
		} `json:"room"`
	}
	if f := q.Get("filter"); strings.HasPrefix(f, "{") {
		if err := json.Unmarshal([]byte(f), &filter); err != nil {
			writeErr(w, http.StatusBadRequest, "M_INVALID_PARAM", "bad filter")
			return tl, 0, 0, false
		}
	}
	tl = filter.Room.Timeline
	if tl.Limit <= 0 {
		tl.Limit = 10
	}
	since = -1
	if v := q.Get("since"); v != "" {
		p, ok := parseToken(v)
		switch {
		case !ok && s.opts.Sync.BadSinceIsInitial:
			p = -1 // an initial sync, as the Conduit family gives
		case !ok:
			writeErr(w, http.StatusBadRequest, "M_UNKNOWN_POS", "unknown since token")
			return tl, 0, 0, false
		}
		since = p
	}
	timeout, _ = strconv.Atoi(q.Get("timeout"))
	return tl, since, timeout, true
}

// parkLocked long-polls: it waits, with s.mu held on entry and on return,
// until the log grows past since, the timeout passes, the request ends or
// the server closes.
func (s *Server) parkLocked(r *http.Request, since int64, timeout int) {
	deadline := time.NewTimer(time.Duration(timeout) * time.Millisecond)
	defer deadline.Stop()
	s.parked[since]++
	s.broadcastLocked()
	for since == int64(len(s.log)) {
		ch := s.changed
		s.mu.Unlock()
		stop := false
		select {
		case <-ch:
		case <-deadline.C:
			stop = true
		case <-r.Context().Done():
			stop = true
		case <-s.done:
			stop = true
		}
		s.mu.Lock()
		if stop {
			break
		}
	}
	if s.parked[since]--; s.parked[since] == 0 {
		delete(s.parked, since)
	}
}

// joinedLocked returns the rooms.join of a /sync answer from since (-1:
// an initial sync of every room) to head.
func (s *Server) joinedLocked(since, head int64, tl timelineFilter) map[string]any {
	join := map[string]any{}
	if since < 0 {
		for id, rm := range s.rooms {
			join[id] = s.timelineOf(rm.events, tl)
		}
		return join
	}
	perRoom := map[string][]*Event{}
	for _, e := range s.log[since:head] {
		perRoom[e.Room] = append(perRoom[e.Room], e)
	}
	for id, evs := range perRoom {
		join[id] = s.timelineOf(evs, tl)
	}
	return join
}

// timeline renders evs (oldest first) as a sync timeline of at most
// tl.Limit matching events.
func (s *Server) timeline(evs []*Event, tl timelineFilter) map[string]any {
	var kept []*Event
	limited := false
	for i := len(evs) - 1; i >= 0; i-- {
		if !tl.match(evs[i]) {
			continue
		}
		if len(kept) == tl.Limit {
			limited = true
			break
		}
		kept = append(kept, evs[i])
	}
	out := make([]any, 0, len(kept))
	for i := len(kept) - 1; i >= 0; i-- {
		out = append(out, s.wireEvent(kept[i], false))
	}
	t := map[string]any{"events": out, "limited": limited}
	if len(kept) > 0 {
		t["prev_batch"] = token(kept[len(kept)-1].pos - 1)
	}
	return map[string]any{"timeline": t}
}

func (s *Server) sendHandler(w http.ResponseWriter, r *http.Request) {
	at := s.opts.Now()
	if !s.authorized(r) {
		writeErr(w, http.StatusUnauthorized, "M_UNKNOWN_TOKEN", "unknown access token")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody || !json.Valid(body) {
		writeErr(w, http.StatusBadRequest, "M_NOT_JSON", "content is not JSON")
		return
	}
	roomID, typ, txn := r.PathValue("room"), r.PathValue("type"), r.PathValue("txn")
	if s.opts.OnRequest != nil {
		s.opts.OnRequest("send", roomID, at)
	}
	s.mu.Lock()
	s.counts["send"]++
	if wait, limited := s.rateLimitedLocked(); limited {
		s.counts["send_429"]++
		s.mu.Unlock()
		s.writeLimited(w, wait)
		return
	}
	key := s.txnKeyLocked(txn)
	delay, lock, restarted := s.nextSendDelayLocked(), s.roomLockLocked(roomID), s.restarted
	early := s.opts.Txn.LookupBeforeLock
	if early {
		if e, ok := s.txns[key]; ok && s.txnLiveLocked(e) {
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, map[string]any{"event_id": e.eventID})
			return
		}
	}
	s.mu.Unlock()
	// The room's send lock spans the lookup, the append and the mapping
	// (Continuwuity's state mutex); a delayed send holds it while it
	// waits, whether or not its client is still there.
	lock.Lock()
	defer lock.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-restarted: // killed before the append: nothing stored
			return
		case <-s.done:
			return
		}
	}
	s.mu.Lock()
	if e, ok := s.txns[key]; !early && ok && s.txnLiveLocked(e) {
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"event_id": e.eventID})
		return
	}
	ev, err := s.appendLocked(roomID, s.opts.UserID, typ, body, txn)
	if err != nil {
		s.mu.Unlock()
		writeErr(w, http.StatusForbidden, "M_FORBIDDEN", "not in room")
		return
	}
	fault := s.nextSendFaultLocked() // counted as "send_fault"
	if fault != StoreNoMappingThen500 && fault != StoreNoMappingThenClose {
		s.txns[key] = txnEntry{eventID: ev.ID, at: s.opts.Now()}
	}
	s.mu.Unlock()
	if s.opts.OnSend != nil {
		s.opts.OnSend(Send{Room: roomID, EventID: ev.ID, TxnID: txn, Content: body, At: at})
	}
	if fault != 0 {
		failSend(w, fault)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"event_id": ev.ID})
}

// lookup returns the event id of roomID, or writes 404.
func (s *Server) lookupLocked(w http.ResponseWriter, roomID, id string) (*Event, bool) {
	e := s.byID[id]
	if e == nil || e.Room != roomID {
		writeErr(w, http.StatusNotFound, "M_NOT_FOUND", "event not found")
		return nil, false
	}
	return e, true
}

func (s *Server) event(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if a := s.eventAnswers[r.PathValue("event")]; a != nil {
		if a.n > 0 {
			if a.n--; a.n == 0 {
				delete(s.eventAnswers, r.PathValue("event"))
			}
		}
		status, body := a.status, a.body
		s.mu.Unlock()
		if json.Valid([]byte(body)) {
			w.Header().Set("Content-Type", "application/json")
		} else {
			w.Header().Set("Content-Type", "text/html")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
		return
	}
	e, ok := s.lookupLocked(w, r.PathValue("room"), r.PathValue("event"))
	var m map[string]any
	if ok {
		m = s.wireEvent(e, true)
	}
	s.mu.Unlock()
	if ok {
		writeJSON(w, http.StatusOK, m)
	}
}

func parseFilter(r *http.Request) (timelineFilter, bool) {
	var f timelineFilter
	if v := r.URL.Query().Get("filter"); v != "" {
		if json.Unmarshal([]byte(v), &f) != nil {
			return f, false
		}
	}
	return f, true
}

func limitOf(r *http.Request, def int) int {
	n, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || n <= 0 {
		return def
	}
	return min(n, 1000)
}

func (s *Server) context(w http.ResponseWriter, r *http.Request) {
	f, ok := parseFilter(r)
	if !ok {
		writeErr(w, http.StatusBadRequest, "M_INVALID_PARAM", "bad filter")
		return
	}
	limit := limitOf(r, 10)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.lookupLocked(w, r.PathValue("room"), r.PathValue("event"))
	if !ok {
		return
	}
	evs := s.rooms[e.Room].events
	at := indexOf(evs, e.pos)
	var before, after [][]byte
	// The smaller half before, as the servers split it (Synapse v1.67.0
	// get_event_context, synapse/handlers/room.py: before_limit =
	// floor(limit/2); the Conduit family the same, docs/homeservers.md).
	nb, na := limit/2, limit-limit/2
	start, end := e.pos-1, e.pos
	for i := at - 1; i >= 0 && len(before) < nb; i-- {
		if f.match(evs[i]) {
			before = append(before, s.wireJSON(evs[i]))
			start = evs[i].pos - 1
		}
	}
	for i := at + 1; i < len(evs) && len(after) < na; i++ {
		if f.match(evs[i]) {
			after = append(after, s.wireJSON(evs[i]))
			end = evs[i].pos
		}
	}
	// Assembled from the encoded events: json.Marshal would re-validate
	// and compact every one of them.
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"start":%q,"end":%q,"event":`, token(start), token(end))
	b.Write(s.wireJSON(e))
	for _, list := range []struct {
		name string
		evs  [][]byte
	}{{"events_before", before}, {"events_after", after}} {
		fmt.Fprintf(&b, `,%q:[`, list.name)
		b.Write(bytes.Join(list.evs, []byte(",")))
		b.WriteByte(']')
	}
	b.WriteString(`,"state":[]}`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Bytes())
}

// indexOf finds the event at stream position pos in evs (sorted by pos).
func indexOf(evs []*Event, pos int64) int {
	lo, hi := 0, len(evs)
	for lo < hi {
		mid := (lo + hi) / 2
		if evs[mid].pos < pos {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	f, ok := parseFilter(r)
	if !ok {
		writeErr(w, http.StatusBadRequest, "M_INVALID_PARAM", "bad filter")
		return
	}
	q := r.URL.Query()
	limit := limitOf(r, 10)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failMessages > 0 {
		s.failMessages--
		writeErr(w, http.StatusServiceUnavailable, "M_UNKNOWN", "fakehs: injected /messages failure")
		return
	}
	rm := s.rooms[r.PathValue("room")]
	if rm == nil {
		writeErr(w, http.StatusForbidden, "M_FORBIDDEN", "not in room")
		return
	}
	from := int64(len(s.log))
	if v := q.Get("from"); v != "" {
		p, ok := parseToken(v)
		if !ok {
			writeErr(w, http.StatusBadRequest, "M_INVALID_PARAM", "bad from token")
			return
		}
		from = p
	}
	chunk := []any{}
	resp := map[string]any{"start": token(from)}
	if q.Get("dir") == "f" {
		i := indexOf(rm.events, from+1)
		for ; i < len(rm.events) && len(chunk) < limit; i++ {
			if f.match(rm.events[i]) {
				chunk = append(chunk, s.wireEvent(rm.events[i], true))
			}
		}
		if i < len(rm.events) {
			resp["end"] = token(rm.events[i-1].pos)
		}
	} else {
		i := indexOf(rm.events, from+1) - 1
		for ; i >= 0 && len(chunk) < limit; i-- {
			if f.match(rm.events[i]) {
				chunk = append(chunk, s.wireEvent(rm.events[i], true))
			}
		}
		if i >= 0 {
			resp["end"] = token(rm.events[i+1].pos - 1)
		}
	}
	resp["chunk"] = chunk
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) joinedMembers(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	rm := s.rooms[r.PathValue("room")]
	joined := map[string]any{}
	if rm != nil {
		for u, name := range rm.members {
			joined[u] = map[string]any{"display_name": name}
		}
	}
	s.mu.Unlock()
	if rm == nil {
		writeErr(w, http.StatusForbidden, "M_FORBIDDEN", "not in room")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"joined": joined})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"errcode":"M_UNKNOWN","error":"encoding failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]string{"errcode": code, "error": msg})
}
