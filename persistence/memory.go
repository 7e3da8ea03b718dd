package persistence

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// Memory is a Store kept in process memory, for tests. It behaves like
// Badger in every observable way the conformance suite checks, and it
// copies every message in and out so callers cannot alias stored state.
type Memory struct {
	mu        sync.Mutex
	closed    bool
	events    map[string]map[uint64]proto.Message
	snapshots map[string]map[uint64]proto.Message
	cursor    *roompb.SyncCursor
	seq       uint64
	inbox     map[string]map[uint64]*roompb.Candidate
	routed    map[[2]string]uint64
	bot       map[[2]string]string
	answered  map[[2]string]string // (room, invoking event) -> Lisa's reply
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty memory store.
func NewMemory() *Memory {
	return &Memory{
		events:    map[string]map[uint64]proto.Message{},
		snapshots: map[string]map[uint64]proto.Message{},
		cursor:    &roompb.SyncCursor{},
		inbox:     map[string]map[uint64]*roompb.Candidate{},
		routed:    map[[2]string]uint64{},
		bot:       map[[2]string]string{},
		answered:  map[[2]string]string{},
	}
}

func (m *Memory) lock() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// Sync implements Store; memory has nothing to sync.
func (m *Memory) Sync() error { return nil }

// Barrier implements Store; memory has nothing to sync.
func (m *Memory) Barrier() func() error { return func() error { return nil } }

// Close implements Store.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// AppendEvent implements Journal.
func (m *Memory) AppendEvent(name string, index uint64, ev proto.Message) error {
	if _, err := encodeAny(ev); err != nil {
		return err
	}
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	evs := m.events[name]
	if evs == nil {
		evs = map[uint64]proto.Message{}
		m.events[name] = evs
	}
	if _, ok := evs[index]; ok {
		return fmt.Errorf("%w: %s index %d", ErrConflict, messages.ActorLogID(name), index)
	}
	evs[index] = proto.Clone(ev)
	if room, eventID, ok := TakenFromInbox(ev); ok {
		m.removeInbox(room, eventID)
	}
	return nil
}

// Events implements Journal.
func (m *Memory) Events(name string, from, to uint64, fn func(uint64, proto.Message) error) error {
	if err := m.lock(); err != nil {
		return err
	}
	var idx []uint64
	for i := range m.events[name] {
		if i >= from && (to == 0 || i < to) {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	msgs := make([]proto.Message, len(idx))
	for n, i := range idx {
		msgs[n] = proto.Clone(m.events[name][i])
	}
	m.mu.Unlock()
	want := from
	for n, i := range idx {
		if i != want {
			return gapError(name, want, i)
		}
		if err := fn(i, msgs[n]); err != nil {
			return err
		}
		want++
	}
	return nil
}

// SaveSnapshot implements Journal.
func (m *Memory) SaveSnapshot(name string, index uint64, snap proto.Message) error {
	if _, err := encodeAny(snap); err != nil {
		return err
	}
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if m.snapshots[name] == nil {
		m.snapshots[name] = map[uint64]proto.Message{}
	}
	m.snapshots[name][index] = proto.Clone(snap)
	return nil
}

// LatestSnapshot implements Journal.
func (m *Memory) LatestSnapshot(name string) (proto.Message, uint64, bool, error) {
	if err := m.lock(); err != nil {
		return nil, 0, false, err
	}
	defer m.mu.Unlock()
	var (
		best  uint64
		found bool
	)
	for i := range m.snapshots[name] {
		if !found || i > best {
			best, found = i, true
		}
	}
	if !found {
		return nil, 0, false, nil
	}
	return proto.Clone(m.snapshots[name][best]), best, true, nil
}

// DeleteEvents implements Journal.
func (m *Memory) DeleteEvents(name string, inclusiveTo uint64) error {
	return m.deleteTo(m.events, name, inclusiveTo)
}

// DeleteSnapshots implements Journal.
func (m *Memory) DeleteSnapshots(name string, inclusiveTo uint64) error {
	return m.deleteTo(m.snapshots, name, inclusiveTo)
}

func (m *Memory) deleteTo(set map[string]map[uint64]proto.Message, name string, inclusiveTo uint64) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	for i := range set[name] {
		if i <= inclusiveTo {
			delete(set[name], i)
		}
	}
	return nil
}

// Cursor implements Ledger.
func (m *Memory) Cursor() (*roompb.SyncCursor, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	return proto.Clone(m.cursor).(*roompb.SyncCursor), nil
}

// CommitSync implements Ledger.
func (m *Memory) CommitSync(cur *roompb.SyncCursor, cands []*roompb.Candidate) ([]*roompb.Candidate, error) {
	for _, c := range cands {
		if err := validateCandidate(c); err != nil {
			return nil, err
		}
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var accepted []*roompb.Candidate
	for _, c := range cands {
		k := [2]string{c.GetRoomId(), c.GetEventId()}
		if _, ok := m.routed[k]; ok {
			continue
		}
		m.seq++
		entry := proto.Clone(c).(*roompb.Candidate)
		entry.InboxSeq = m.seq
		m.routed[k] = m.seq
		if m.inbox[c.GetRoomId()] == nil {
			m.inbox[c.GetRoomId()] = map[uint64]*roompb.Candidate{}
		}
		m.inbox[c.GetRoomId()][m.seq] = entry
		accepted = append(accepted, proto.Clone(entry).(*roompb.Candidate))
	}
	m.cursor = proto.Clone(cur).(*roompb.SyncCursor)
	return accepted, nil
}

// Inbox implements Ledger.
func (m *Memory) Inbox(room string) ([]*roompb.Candidate, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []*roompb.Candidate
	for _, c := range m.inbox[room] {
		out = append(out, proto.Clone(c).(*roompb.Candidate))
	}
	slices.SortFunc(out, func(a, b *roompb.Candidate) int {
		return cmp.Compare(a.GetInboxSeq(), b.GetInboxSeq())
	})
	return out, nil
}

// RemoveInbox implements Ledger.
func (m *Memory) RemoveInbox(room, eventID string) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	m.removeInbox(room, eventID)
	return nil
}

// removeInbox deletes an inbox entry, keeping its routed marker; m.mu is
// held.
func (m *Memory) removeInbox(room, eventID string) {
	if seq, ok := m.routed[[2]string{room, eventID}]; ok {
		delete(m.inbox[room], seq)
	}
}

// RecordBotEvent implements BotEvents.
func (m *Memory) RecordBotEvent(room, eventID, inReplyTo string) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	m.bot[[2]string{room, eventID}] = inReplyTo
	if inReplyTo != "" {
		m.answered[[2]string{room, inReplyTo}] = eventID
	}
	return nil
}

// RepliedTo implements BotEvents.
func (m *Memory) RepliedTo(room, invoking string) (string, error) {
	if err := m.lock(); err != nil {
		return "", err
	}
	defer m.mu.Unlock()
	return m.answered[[2]string{room, invoking}], nil
}

// IsBotEvent implements BotEvents.
func (m *Memory) IsBotEvent(room, eventID string) (bool, error) {
	if err := m.lock(); err != nil {
		return false, err
	}
	defer m.mu.Unlock()
	_, ok := m.bot[[2]string{room, eventID}]
	return ok, nil
}
