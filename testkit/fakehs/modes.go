package fakehs

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The modes in this file are the homeserver behaviours of
// docs/homeservers.md ("Differences → what Lisa must do → fake-homeserver
// mode"), each named after the server it copies; the doc cites the source
// each was read in.

// TxnPolicy is how the fake keeps send transaction IDs.
type TxnPolicy struct {
	// ForgetOnRestart makes Restart forget every transaction ID, as
	// Dendrite does (an in-memory map, internal/transactions). Otherwise
	// they survive it, as on Synapse (the event_txn_id table) and
	// Continuwuity (RocksDB, userdevicetxnid_response).
	ForgetOnRestart bool
	// Expiry forgets a mapping this long after it was made (by
	// Options.Now): Synapse deletes rows older than 24 h. Zero: never.
	Expiry time.Duration
	// PerToken scopes a mapping to the access token that made it, as
	// Synapse v1.67 does (a new login, SetToken, does not see the old
	// token's mappings). Otherwise it is per device (Continuwuity).
	PerToken bool
	// LookupBeforeLock looks a send's transaction ID up before taking the
	// room's send lock, as Dendrite's SendEvent calls
	// txnCache.FetchTransaction before userRoomSendMutexes: a retry that
	// arrives while the first request still runs misses and makes a
	// second event. Otherwise the lookup is under the lock, as
	// Continuwuity's (the room state mutex), and the retry waits for the
	// first and finds its mapping.
	LookupBeforeLock bool
}

// DelaySends makes the next n sends wait d, holding their room's send
// lock, before they store their event, whether or not their client is
// still waiting: Continuwuity runs each handler in a spawned task
// (request::handle, src/router/request.rs), so a request whose client
// went away still finishes, within client_request_timeout (180 s). A
// Restart or Close while one waits drops it: nothing is stored (a kill;
// Continuwuity's shutdown grace of 15 s is not modelled).
func (s *Server) DelaySends(n int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.sendDelays = append(s.sendDelays, d)
	}
}

func (s *Server) nextSendDelayLocked() time.Duration {
	if len(s.sendDelays) == 0 {
		return 0
	}
	d := s.sendDelays[0]
	s.sendDelays = s.sendDelays[1:]
	return d
}

func (s *Server) roomLockLocked(room string) *sync.Mutex {
	l := s.roomLocks[room]
	if l == nil {
		l = &sync.Mutex{}
		s.roomLocks[room] = l
	}
	return l
}

// txnEntry is one remembered send.
type txnEntry struct {
	eventID string
	at      time.Time
}

func (s *Server) txnKeyLocked(txn string) string {
	if s.opts.Txn.PerToken {
		return "token\x00" + s.token + "\x00" + txn
	}
	return "device\x00" + s.opts.DeviceID + "\x00" + txn
}

func (s *Server) txnLiveLocked(e txnEntry) bool {
	return s.opts.Txn.Expiry <= 0 || s.opts.Now().Sub(e.at) < s.opts.Txn.Expiry
}

// Restart stops the server, dropping every connection (parked /sync
// requests and sends in flight end without an answer), applies the
// transaction policy, and serves again at the same URL. Stored events and
// the stream position survive, as they do on every homeserver.
func (s *Server) Restart() error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed || s.hs == nil {
		return fmt.Errorf("fakehs: restart: not serving")
	}
	_ = s.hs.Close()
	<-s.served
	s.mu.Lock()
	if s.opts.Txn.ForgetOnRestart {
		s.txns = map[string]txnEntry{}
	}
	s.counts["restart"]++
	close(s.restarted)
	s.restarted = make(chan struct{})
	s.broadcastLocked()
	s.mu.Unlock()
	var ln net.Listener
	var err error
	for range 50 { // the old socket may take a moment to let the port go
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("fakehs: restart: %w", err)
	}
	s.serveLocked(ln)
	return nil
}

// SetToken replaces the accepted access token, as a new login on the same
// device does: the old token is refused from now on.
func (s *Server) SetToken(tok string) {
	s.mu.Lock()
	s.token = tok
	s.mu.Unlock()
}

// SendFault is how a send scripted by FailSends ends.
type SendFault int

const (
	// StoreNoMappingThen500 stores the event, keeps no transaction
	// mapping and answers 500: Continuwuity when an error follows the
	// append (send_pdu_servers in build_and_append_pdu) — the event is in
	// the room, a retry with the same transaction ID makes a second one.
	StoreNoMappingThen500 SendFault = iota + 1
	// StoreNoMappingThenClose is the same with the connection closed
	// instead of an answer: Continuwuity killed between the append and
	// add_client_txnid.
	StoreNoMappingThenClose
	// StoreThenClose stores the event and its mapping, then closes the
	// connection: an answer lost on the way back.
	StoreThenClose
)

// FailSends makes the next n PUT sends that store a new event end with
// fault. The stored event keeps its unsigned.transaction_id, as
// Continuwuity puts it into the event itself (send_message_event_route,
// src/api/client/send.rs).
func (s *Server) FailSends(n int, fault SendFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.sendFaults = append(s.sendFaults, fault)
	}
}

func (s *Server) nextSendFaultLocked() SendFault {
	if len(s.sendFaults) == 0 {
		return 0
	}
	f := s.sendFaults[0]
	s.sendFaults = s.sendFaults[1:]
	s.counts["send_fault"]++
	return f
}

// failSend ends a send with fault after the event was stored.
func failSend(w http.ResponseWriter, fault SendFault) {
	if fault == StoreNoMappingThen500 {
		writeErr(w, http.StatusInternalServerError, "M_UNKNOWN", "fakehs: injected failure after the event was stored")
		return
	}
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler) // closes the connection without an answer
}

// RateLimit is a token bucket for sends, like Synapse's rc_message
// (per_second 0.2, burst_count 10 by default, synapse/config/ratelimiting.py).
type RateLimit struct {
	// PerSecond is the refill rate; Burst the bucket's size.
	PerSecond float64
	Burst     int
	// OmitRetryAfter leaves retry_after_ms out of the 429, as a reverse
	// proxy's own limit may.
	OmitRetryAfter bool
}

type bucket struct {
	tokens float64
	last   time.Time
	primed bool
}

// rateLimitedLocked takes a token for a send, or reports how long until
// one is available.
func (s *Server) rateLimitedLocked() (time.Duration, bool) {
	rl := s.opts.SendRateLimit
	if rl == nil || rl.PerSecond <= 0 {
		return 0, false
	}
	now := s.opts.Now()
	b := &s.bucket
	if !b.primed {
		b.tokens, b.last, b.primed = float64(rl.Burst), now, true
	}
	b.tokens = math.Min(float64(rl.Burst), b.tokens+now.Sub(b.last).Seconds()*rl.PerSecond)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return 0, false
	}
	return time.Duration((1 - b.tokens) / rl.PerSecond * float64(time.Second)), true
}

func (s *Server) writeLimited(w http.ResponseWriter, wait time.Duration) {
	m := map[string]any{"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests"}
	if !s.opts.SendRateLimit.OmitRetryAfter {
		m["retry_after_ms"] = int64(math.Ceil(float64(wait) / float64(time.Millisecond)))
	}
	writeJSON(w, http.StatusTooManyRequests, m)
}

// AheadSince is what /sync does with a since token past the stream's head.
type AheadSince int

const (
	// AheadSinceRejected answers 400 M_UNKNOWN_POS (the default).
	AheadSinceRejected AheadSince = iota
	// AheadSinceEmpty answers with no rooms and next_batch at the head,
	// lower than the since sent: Continuwuity (load_timeline returns
	// nothing for a room whose last count is <= since). The fake answers
	// at once; whether Continuwuity long-polls first was not read.
	AheadSinceEmpty
	// AheadSinceClamp serves since as the head: Tuwunel ("received
	// since > next_batch, clamping").
	AheadSinceClamp
)

// SyncModes are /sync behaviours of the Conduit family.
type SyncModes struct {
	// BadSinceIsInitial answers an unparsable since with an initial sync
	// (every room's latest events), as the Conduit family's
	// `string.parse().ok()` does, instead of 400 M_UNKNOWN_POS.
	BadSinceIsInitial bool
	// AheadSince is the answer to a since past the head.
	AheadSince AheadSince
	// FixedTimelineLimit, if positive, replaces the filter's timeline
	// limit (conduwuit: load_timeline(..., 10)).
	FixedTimelineLimit int
	// FilterAfterLimit applies the timeline's types and senders after
	// taking the limit (Tuwunel's include_in_timeline): a limited
	// timeline can hold fewer events than the limit, or none.
	FilterAfterLimit bool
}

// timelineOf renders evs as a sync timeline, in the configured mode.
func (s *Server) timelineOf(evs []*Event, tl timelineFilter) map[string]any {
	if !s.opts.Sync.FilterAfterLimit {
		return s.timeline(evs, tl)
	}
	taken := evs[max(0, len(evs)-tl.Limit):]
	out := []any{}
	for _, e := range taken {
		if tl.match(e) {
			out = append(out, s.wireEvent(e, false))
		}
	}
	t := map[string]any{"events": out, "limited": len(taken) < len(evs)}
	if len(taken) > 0 {
		t["prev_batch"] = token(taken[0].pos - 1)
	}
	return map[string]any{"timeline": t}
}

// Identity is how the fake names itself (docs/homeservers.md, "How each
// server names itself").
type Identity struct {
	// ServerHeader, if set, is the Server header of every response
	// (Synapse: "Synapse/1.67.0"; the others set none).
	ServerHeader string
	// Name and Version are the software, for the endpoints below.
	Name, Version string
	// FederationVersion routes GET /_matrix/federation/v1/version on the
	// client API's address (the Conduit family with allow_federation;
	// Synapse when its federation listener is the same).
	FederationVersion bool
	// ServerVersionPath, if set, serves {"name":…,"version":…} there
	// ("/_continuwuity/server_version").
	ServerVersionPath string
}

// Proxy is a reverse proxy in front of the fake.
type Proxy struct {
	// ServerHeader replaces the server's Server header ("nginx" sends its
	// own by default, proxy_hide_header); "" removes it.
	ServerHeader string
	// HideFederation answers 404 for /_matrix/federation/ (not routed).
	HideFederation bool
}

// identify wraps next with the Server header and the proxy.
func (s *Server) identify(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := s.opts.Identity.ServerHeader
		if p := s.opts.Proxy; p != nil {
			h = p.ServerHeader
			if p.HideFederation && strings.HasPrefix(r.URL.Path, "/_matrix/federation/") {
				if h != "" {
					w.Header().Set("Server", h)
				}
				http.NotFound(w, r)
				return
			}
		}
		if h != "" {
			w.Header().Set("Server", h)
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) federationVersion(w http.ResponseWriter, _ *http.Request) {
	id := s.opts.Identity
	if !id.FederationVersion || id.Name == "" {
		writeErr(w, http.StatusNotFound, "M_UNRECOGNIZED", "unrecognized request")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"server": map[string]string{"name": id.Name, "version": id.Version}})
}

func (s *Server) serverVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"name": s.opts.Identity.Name, "version": s.opts.Identity.Version})
}

// RelationsModes are /relations behaviours. The default pages correctly:
// filters before the limit, next_batch the oldest event of a dir=b page
// when more remain (Tuwunel's order).
type RelationsModes struct {
	// FilterAfterLimit drops the events hidden by HideFromRelations only
	// after taking the limit, and sets next_batch only when the filtered
	// page is still full: Continuwuity (paginate_relations_with_filter
	// applies visibility_filter after take(limit), has_more =
	// events.len() >= limit). A short page then has no next_batch
	// although older relations exist.
	FilterAfterLimit bool
	// NextBatchNewest gives a dir=b page's newest event as next_batch
	// (Continuwuity, conduwuit): the next page repeats all but one event.
	NextBatchNewest bool
}

// HideFromRelations makes /relations filter eventID out, as a visibility
// or ignored-user filter would.
func (s *Server) HideFromRelations(eventID string) {
	s.mu.Lock()
	s.hidden[eventID] = true
	s.mu.Unlock()
}

// relations serves GET /relations/{event}/{relType}, dir=b only (as Lisa
// asks), from a token of the form of /messages's.
func (s *Server) relations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if d := q.Get("dir"); d != "" && d != "b" {
		writeErr(w, http.StatusBadRequest, "M_INVALID_PARAM", "fakehs: only dir=b")
		return
	}
	limit := min(limitOf(r, 30), 100)
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.rooms[r.PathValue("room")]
	if rm == nil {
		writeErr(w, http.StatusForbidden, "M_FORBIDDEN", "not in room")
		return
	}
	from := int64(len(s.log)) + 1
	if v := q.Get("from"); v != "" {
		p, ok := parseToken(v)
		if !ok {
			writeErr(w, http.StatusBadRequest, "M_INVALID_PARAM", "bad from token")
			return
		}
		from = p
	}
	root, relType := r.PathValue("event"), r.PathValue("relType")
	after := s.opts.Relations.FilterAfterLimit
	var page []*Event
	more := false
	for i := len(rm.events) - 1; i >= 0; i-- {
		e := rm.events[i]
		if e.pos >= from || !relatesTo(e, root, relType) || (!after && s.hidden[e.ID]) {
			continue
		}
		if len(page) == limit {
			more = true
			break
		}
		page = append(page, e)
	}
	if after {
		kept := page[:0:0]
		for _, e := range page {
			if !s.hidden[e.ID] {
				kept = append(kept, e)
			}
		}
		page, more = kept, len(kept) >= limit
	}
	chunk := make([]any, 0, len(page))
	for _, e := range page {
		chunk = append(chunk, s.wireEvent(e, true))
	}
	resp := map[string]any{"chunk": chunk}
	if more && len(page) > 0 {
		next := page[len(page)-1]
		if s.opts.Relations.NextBatchNewest {
			next = page[0]
		}
		resp["next_batch"] = token(next.pos)
	}
	writeJSON(w, http.StatusOK, resp)
}

// relatesTo reports whether e's m.relates_to names root with relType.
func relatesTo(e *Event, root, relType string) bool {
	var c struct {
		Rel struct {
			Type    string `json:"rel_type"`
			EventID string `json:"event_id"`
		} `json:"m.relates_to"`
	}
	return json.Unmarshal(e.Content, &c) == nil && c.Rel.EventID == root && c.Rel.Type == relType
}
