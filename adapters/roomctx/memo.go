package roomctx

import (
	"encoding/json"
	"sync"

	"maunium.net/go/mautrix/event"
)

const (
	// defaultMemoBytes bounds each memo of a Builder, in bytes of keys and
	// values.
	defaultMemoBytes = 4 << 20
	// contentOverhead estimates a decoded message content beyond its
	// strings, for the memo's byte count.
	contentOverhead = 256
)

// memo remembers the results of a pure function of a string, within a
// byte budget. A room's context window is mostly the same messages from
// one invocation to the next (half of them Lisa's own HTML answers), so
// decoding and converting each message once instead of at every
// invocation takes most of the CPU out of building a lived-in room's
// context. Because the function is pure and the key is its whole input, a
// remembered result is always the one a new computation would give.
//
// It keeps two generations: entries go into the current one; when that
// holds half the budget it becomes the previous one and the older
// generation is dropped. A hit in the previous generation moves the entry
// forward, so messages still in some room's window survive. At most the
// budget is held; an entry larger than half of it is not kept. Safe for
// concurrent use.
type memo[V any] struct {
	mu        sync.Mutex
	cur, prev map[string]entry[V]
	curBytes  int
	budget    int
}

// entry is a remembered value and its size in bytes, key included.
type entry[V any] struct {
	v    V
	size int
}

// newMemo returns a memo holding at most budget bytes.
func newMemo[V any](budget int) *memo[V] {
	return &memo[V]{cur: map[string]entry[V]{}, prev: map[string]entry[V]{}, budget: budget}
}

// get returns the value remembered for key.
func (m *memo[V]) get(key string) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.cur[key]
	if !ok {
		if e, ok = m.prev[key]; ok {
			m.putLocked(key, e)
		}
	}
	return e.v, ok
}

// getBytes is get for a key held as bytes, without copying it.
func (m *memo[V]) getBytes(key []byte) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.cur[string(key)] // the compiler does not copy key here
	if !ok {
		if e, ok = m.prev[string(key)]; ok {
			m.putLocked(string(key), e)
		}
	}
	return e.v, ok
}

// put remembers v for key; size is v's approximate size in bytes.
func (m *memo[V]) put(key string, v V, size int) {
	m.mu.Lock()
	m.putLocked(key, entry[V]{v: v, size: size + len(key)})
	m.mu.Unlock()
}

// putLocked stores e in the current generation, rotating first if it
// would overflow it.
func (m *memo[V]) putLocked(key string, e entry[V]) {
	half := m.budget / 2
	if e.size > half {
		return
	}
	if _, ok := m.cur[key]; ok {
		return
	}
	if m.curBytes+e.size > half {
		m.prev, m.cur, m.curBytes = m.cur, make(map[string]entry[V], len(m.cur)), 0
	}
	m.cur[key] = e
	m.curBytes += e.size
}

// memos are a Builder's remembered conversions, shared by its copies.
type memos struct {
	html    *memo[string]                     // htmlToText by source
	content *memo[*event.MessageEventContent] // message contents by raw JSON
}

// newMemos returns memos of budget bytes each.
func newMemos(budget int) *memos {
	return &memos{html: newMemo[string](budget), content: newMemo[*event.MessageEventContent](budget)}
}

// htmlToText returns htmlToText(src), remembered. A nil m converts
// without remembering.
func (m *memos) htmlToText(src string) string {
	if m == nil {
		return htmlToText(src)
	}
	if text, ok := m.html.get(src); ok {
		return text
	}
	// Converted outside the lock: conversions for different rooms run at
	// once.
	text := htmlToText(src)
	m.html.put(src, text, len(text))
	return text
}

// decodeContent decodes raw message content, remembered. The result is
// shared and must not be modified.
func (m *memos) decodeContent(raw []byte) (*event.MessageEventContent, bool) {
	if m != nil {
		if msg, ok := m.content.getBytes(raw); ok {
			return msg, true
		}
	}
	var msg event.MessageEventContent
	if err := json.Unmarshal(raw, &msg); err != nil {
		return nil, false
	}
	if m != nil {
		m.content.put(string(raw), &msg, len(raw)+contentOverhead)
	}
	return &msg, true
}
