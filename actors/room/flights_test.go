package room

import (
	"testing"
	"time"
)

// TestFlightsQuietSince: a room is quiet since the process started, the end
// of its last send, or its last failed lookup, whichever is latest; rooms
// do not share it.
func TestFlightsQuietSince(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	f := NewFlights(func() time.Time { return now })
	start := now
	if got := f.quietSince("!a:hs"); !got.Equal(start) {
		t.Fatalf("fresh room quiet since %v, want the start %v", got, start)
	}
	now = now.Add(10 * time.Second)
	done := f.begin("!a:hs")
	now = now.Add(3 * time.Second)
	done()
	if got, want := f.quietSince("!a:hs"), start.Add(13*time.Second); !got.Equal(want) {
		t.Fatalf("after a send: %v, want its end %v", got, want)
	}
	if got := f.quietSince("!b:hs"); !got.Equal(start) {
		t.Fatalf("another room: %v, want the start", got)
	}
	now = now.Add(time.Minute)
	f.lookupFailed("!a:hs")
	if got, want := f.quietSince("!a:hs"), start.Add(73*time.Second); !got.Equal(want) {
		t.Fatalf("after a failed lookup: %v, want %v", got, want)
	}
}
