package roomctx

import (
	"sync"

	"maunium.net/go/mautrix/id"
)

// maxRememberedStarts bounds the rooms and threads whose block start a
// Builder remembers.
const maxRememberedStarts = 4096

// starts remembers, per room and thread, the first message of the last
// block built, so that the next block can start there too (see
// [Builder.selectTurns]). When full it forgets everything at once: a
// forgotten start only costs one block that starts afresh. Safe for
// concurrent use.
type starts struct {
	mu    sync.Mutex
	first map[string]id.EventID
	limit int
}

func newStarts(limit int) *starts {
	return &starts{first: map[string]id.EventID{}, limit: limit}
}

func (s *starts) get(key string) (id.EventID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.first[key]
	return e, ok
}

func (s *starts) put(key string, first id.EventID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.first[key]; !ok && len(s.first) >= s.limit {
		clear(s.first)
	}
	s.first[key] = first
}

// startKey names the block of a room's main timeline ("" thread) or of
// one of its threads.
func startKey(room id.RoomID, thread string) string {
	return string(room) + "\x00" + thread
}
