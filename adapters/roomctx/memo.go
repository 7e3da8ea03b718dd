package roomctx

import "sync"

// defaultMemoBytes bounds the HTML conversions a Builder remembers: the
// HTML sources plus their texts, in bytes.
const defaultMemoBytes = 4 << 20

// textMemo remembers htmlToText results. A room's context window is
// mostly the same messages from one invocation to the next (and half of
// them are Lisa's own HTML answers), so converting each message once
// instead of at every invocation takes most of the CPU out of building a
// lived-in room's context. htmlToText is a pure function of its input, so
// a remembered result is always the one a conversion would give.
//
// It keeps two generations: entries go into the current one; when that
// holds half the budget it becomes the previous one and the older
// generation is dropped. A hit in the previous generation moves the entry
// forward, so messages still in some room's window survive. At most the
// budget in bytes is held; a larger input is converted but not kept. The
// zero value is not usable; a nil *textMemo converts without remembering.
type textMemo struct {
	mu        sync.Mutex
	cur, prev map[string]string
	curBytes  int
	budget    int
}

// newTextMemo returns a memo holding at most budget bytes.
func newTextMemo(budget int) *textMemo {
	return &textMemo{cur: map[string]string{}, prev: map[string]string{}, budget: budget}
}

// htmlToText returns htmlToText(src), remembered.
func (m *textMemo) htmlToText(src string) string {
	if m == nil {
		return htmlToText(src)
	}
	m.mu.Lock()
	text, ok := m.cur[src]
	if !ok {
		if text, ok = m.prev[src]; ok {
			m.putLocked(src, text)
		}
	}
	m.mu.Unlock()
	if ok {
		return text
	}
	// Convert outside the lock: conversions of different rooms run at once.
	text = htmlToText(src)
	m.mu.Lock()
	m.putLocked(src, text)
	m.mu.Unlock()
	return text
}

// putLocked stores one entry in the current generation, rotating first
// if it would overflow it.
func (m *textMemo) putLocked(src, text string) {
	size := len(src) + len(text)
	half := m.budget / 2
	if size > half {
		return
	}
	if _, ok := m.cur[src]; ok {
		return
	}
	if m.curBytes+size > half {
		m.prev, m.cur, m.curBytes = m.cur, make(map[string]string, len(m.cur)), 0
	}
	m.cur[src] = text
	m.curBytes += size
}
