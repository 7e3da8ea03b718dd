package persistencetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/persistence"
)

// Factory opens stores for the suite.
type Factory struct {
	// Open returns a new, empty store. The suite closes it.
	Open func(t testing.TB) persistence.Store
	// Reopen closes s and opens the same data again. Nil for stores
	// without durability; the durability cases are then skipped by design
	// of the caller, not silently: Run reports it with t.Log.
	Reopen func(t testing.TB, s persistence.Store) persistence.Store
}

// Run runs the whole suite against f.
func Run(t *testing.T, f Factory) {
	cases := []struct {
		name string
		fn   func(t *testing.T, s persistence.Store)
	}{
		{"JournalRoundTrip", journalRoundTrip},
		{"JournalConflict", journalConflict},
		{"JournalGap", journalGap},
		{"JournalRange", journalRange},
		{"JournalNamesIsolated", journalNamesIsolated},
		{"JournalCallbackError", journalCallbackError},
		{"Snapshots", snapshots},
		{"DeleteInclusive", deleteInclusive},
		{"CursorEmptyThenCommitted", cursorCommitted},
		{"InboxOrderAndDedup", inboxOrderAndDedup},
		{"InboxRemoveKeepsMarker", inboxRemoveKeepsMarker},
		{"QueuedEventTakesInboxEntry", queuedEventTakesInboxEntry},
		{"RelationsTakeInboxEntries", relationsTakeInboxEntries},
		{"CommitSyncAtomic", commitSyncAtomic},
		{"CommitSyncDoesNotAlias", commitSyncDoesNotAlias},
		{"BotEvents", botEvents},
		{"BarrierCoversEarlierWrites", barrierCoversEarlierWrites},
		{"ProviderSnapshotCompaction", providerSnapshotCompaction},
		{"ProviderPanicsOnGap", providerPanicsOnGap},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := f.Open(t)
			t.Cleanup(func() { _ = s.Close() })
			c.fn(t, s)
		})
	}
	t.Run("ClosedStoreFails", func(t *testing.T) { closedStoreFails(t, f) })
	if f.Reopen == nil {
		t.Log("store has no durability; reopen cases not applicable")
		return
	}
	t.Run("SurvivesReopen", func(t *testing.T) { survivesReopen(t, f) })
}

func ev(id string) proto.Message { return &roompb.InvocationDuplicate{EventId: id} }

func cand(room, event string) *roompb.Candidate {
	return &roompb.Candidate{RoomId: room, EventId: event, Sender: "@u:hs", Trigger: "mention", Body: "hi " + event}
}

func mustAppend(t testing.TB, s persistence.Store, name string, idx ...uint64) {
	t.Helper()
	for _, i := range idx {
		if err := s.AppendEvent(name, i, ev(fmt.Sprintf("e%d", i))); err != nil {
			t.Fatalf("append %s/%d: %v", name, i, err)
		}
	}
}

func readAll(t testing.TB, s persistence.Store, name string, from uint64) []string {
	t.Helper()
	var got []string
	err := s.Events(name, from, 0, func(i uint64, m proto.Message) error {
		d, ok := m.(*roompb.InvocationDuplicate)
		if !ok {
			return fmt.Errorf("index %d: decoded %T", i, m)
		}
		got = append(got, d.GetEventId())
		return nil
	})
	if err != nil {
		t.Fatalf("Events(%s): %v", name, err)
	}
	return got
}

func journalRoundTrip(t *testing.T, s persistence.Store) {
	want := []proto.Message{
		&roompb.InvocationQueued{Candidate: cand("!r:hs", "$1"), QueuedAtMs: 5},
		&roompb.InvocationStarted{EventId: "$1", Attempt: 1},
		&roompb.ReplyReady{EventId: "$1", TxnId: "lisa_x", Content: []byte(`{"body":"hi"}`)},
		&roompb.ReplySent{EventId: "$1", ReplyEventId: "$r"},
	}
	for i, m := range want {
		if err := s.AppendEvent("rooms/!r:hs", uint64(i), m); err != nil {
			t.Fatal(err)
		}
	}
	var got []proto.Message
	if err := s.Events("rooms/!r:hs", 0, 0, func(i uint64, m proto.Message) error {
		if i != uint64(len(got)) {
			t.Errorf("index %d out of order", i)
		}
		got = append(got, m)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("event %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func journalConflict(t *testing.T, s persistence.Store) {
	mustAppend(t, s, "a", 0)
	err := s.AppendEvent("a", 0, ev("again"))
	if !errors.Is(err, persistence.ErrConflict) {
		t.Fatalf("second write to index 0: %v, want ErrConflict", err)
	}
	if got := readAll(t, s, "a", 0); !slices.Equal(got, []string{"e0"}) {
		t.Fatalf("conflicting write changed the journal: %v", got)
	}
}

func journalGap(t *testing.T, s persistence.Store) {
	mustAppend(t, s, "a", 0, 1, 3)
	var seen []uint64
	err := s.Events("a", 0, 0, func(i uint64, _ proto.Message) error { seen = append(seen, i); return nil })
	if !errors.Is(err, persistence.ErrGap) {
		t.Fatalf("Events over a gap: %v, want ErrGap", err)
	}
	if !slices.Equal(seen, []uint64{0, 1}) {
		t.Fatalf("delivered before the gap: %v", seen)
	}
	// Starting after a missing head is a gap too (events 0..2 deleted
	// without a snapshot at 3 would look like this).
	mustAppend(t, s, "b", 5, 6)
	if err := s.Events("b", 2, 0, func(uint64, proto.Message) error { return nil }); !errors.Is(err, persistence.ErrGap) {
		t.Fatalf("Events from a missing head: %v, want ErrGap", err)
	}
}

func journalRange(t *testing.T, s persistence.Store) {
	mustAppend(t, s, "a", 0, 1, 2, 3, 4)
	var got []uint64
	if err := s.Events("a", 1, 4, func(i uint64, _ proto.Message) error { got = append(got, i); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("Events(1,4) = %v", got)
	}
	if got := readAll(t, s, "a", 5); len(got) != 0 {
		t.Fatalf("Events past the end = %v", got)
	}
	if got := readAll(t, s, "unknown", 0); len(got) != 0 {
		t.Fatalf("unknown journal = %v", got)
	}
}

func journalNamesIsolated(t *testing.T, s persistence.Store) {
	mustAppend(t, s, "rooms/a", 0, 1)
	mustAppend(t, s, "rooms/a/inv", 0)
	mustAppend(t, s, "rooms/ab", 0)
	if got := readAll(t, s, "rooms/a", 0); len(got) != 2 {
		t.Fatalf("rooms/a sees %v", got)
	}
	if err := s.DeleteEvents("rooms/a", 10); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, "rooms/a/inv", 0); len(got) != 1 {
		t.Fatalf("deleting rooms/a touched rooms/a/inv: %v", got)
	}
	if got := readAll(t, s, "rooms/ab", 0); len(got) != 1 {
		t.Fatalf("deleting rooms/a touched rooms/ab: %v", got)
	}
}

func journalCallbackError(t *testing.T, s persistence.Store) {
	mustAppend(t, s, "a", 0, 1, 2)
	stop := errors.New("stop here")
	n := 0
	err := s.Events("a", 0, 0, func(uint64, proto.Message) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("callback error: err=%v calls=%d", err, n)
	}
}

func snapshots(t *testing.T, s persistence.Store) {
	if _, _, ok, err := s.LatestSnapshot("a"); ok || err != nil {
		t.Fatalf("empty store has snapshot: %v %v", ok, err)
	}
	for _, i := range []uint64{3, 10, 7} {
		if err := s.SaveSnapshot("a", i, &roompb.RoomSnapshot{NextEventIndex: i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveSnapshot("a/b", 99, &roompb.RoomSnapshot{NextEventIndex: 99}); err != nil {
		t.Fatal(err)
	}
	snap, idx, ok, err := s.LatestSnapshot("a")
	if err != nil || !ok || idx != 10 {
		t.Fatalf("latest = %d %v %v", idx, ok, err)
	}
	if got := snap.(*roompb.RoomSnapshot).GetNextEventIndex(); got != 10 {
		t.Fatalf("latest snapshot content %d", got)
	}
}

func deleteInclusive(t *testing.T, s persistence.Store) {
	mustAppend(t, s, "a", 0, 1, 2, 3)
	for _, i := range []uint64{1, 2, 3} {
		if err := s.SaveSnapshot("a", i, &roompb.RoomSnapshot{NextEventIndex: i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteEvents("a", 1); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, "a", 2); !slices.Equal(got, []string{"e2", "e3"}) {
		t.Fatalf("after DeleteEvents(1): %v", got)
	}
	if err := s.Events("a", 0, 0, func(uint64, proto.Message) error { return nil }); !errors.Is(err, persistence.ErrGap) {
		t.Fatalf("reading deleted head: %v, want ErrGap", err)
	}
	if err := s.DeleteSnapshots("a", 3); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, _ := s.LatestSnapshot("a"); ok {
		t.Fatal("DeleteSnapshots(3) kept a snapshot")
	}
}

func cursorCommitted(t *testing.T, s persistence.Store) {
	cur, err := s.Cursor()
	if err != nil || cur.GetNextBatch() != "" || cur.GetBaselineDone() {
		t.Fatalf("initial cursor = %v %v", cur, err)
	}
	if _, err := s.CommitSync(&roompb.SyncCursor{NextBatch: "s1", BaselineDone: true}, nil); err != nil {
		t.Fatal(err)
	}
	cur, err = s.Cursor()
	if err != nil || cur.GetNextBatch() != "s1" || !cur.GetBaselineDone() {
		t.Fatalf("cursor = %v %v", cur, err)
	}
}

func inboxOrderAndDedup(t *testing.T, s persistence.Store) {
	acc, err := s.CommitSync(&roompb.SyncCursor{NextBatch: "s1"}, []*roompb.Candidate{
		cand("!a:hs", "$1"), cand("!b:hs", "$2"), cand("!a:hs", "$3"), cand("!a:hs", "$1"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(acc) != 3 {
		t.Fatalf("accepted %d, want 3 (duplicate inside one commit)", len(acc))
	}
	acc, err = s.CommitSync(&roompb.SyncCursor{NextBatch: "s2"}, []*roompb.Candidate{cand("!a:hs", "$3"), cand("!a:hs", "$4")})
	if err != nil {
		t.Fatal(err)
	}
	if len(acc) != 1 || acc[0].GetEventId() != "$4" {
		t.Fatalf("second commit accepted %v, want only $4", acc)
	}
	inbox, err := s.Inbox("!a:hs")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	var last uint64
	for _, c := range inbox {
		ids = append(ids, c.GetEventId())
		if c.GetInboxSeq() <= last {
			t.Fatalf("inbox sequence not increasing: %v", inbox)
		}
		last = c.GetInboxSeq()
		if c.GetBody() != "hi "+c.GetEventId() {
			t.Fatalf("candidate body lost: %v", c)
		}
	}
	if !slices.Equal(ids, []string{"$1", "$3", "$4"}) {
		t.Fatalf("inbox !a = %v", ids)
	}
	if b, _ := s.Inbox("!b:hs"); len(b) != 1 || b[0].GetEventId() != "$2" {
		t.Fatalf("inbox !b = %v", b)
	}
}

func inboxRemoveKeepsMarker(t *testing.T, s persistence.Store) {
	if _, err := s.CommitSync(&roompb.SyncCursor{NextBatch: "s1"}, []*roompb.Candidate{cand("!a:hs", "$1"), cand("!a:hs", "$2")}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if err := s.RemoveInbox("!a:hs", "$1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RemoveInbox("!a:hs", "$never"); err != nil {
		t.Fatalf("removing an absent entry: %v", err)
	}
	inbox, _ := s.Inbox("!a:hs")
	if len(inbox) != 1 || inbox[0].GetEventId() != "$2" {
		t.Fatalf("inbox after remove = %v", inbox)
	}
	acc, err := s.CommitSync(&roompb.SyncCursor{NextBatch: "s2"}, []*roompb.Candidate{cand("!a:hs", "$1")})
	if err != nil || len(acc) != 0 {
		t.Fatalf("a removed event was routed again: %v %v", acc, err)
	}
}

// queuedEventTakesInboxEntry: appending InvocationQueued removes exactly
// its candidate's inbox entry, atomically with the journal write, and keeps
// the routed marker; other events and a refused append remove nothing.
func queuedEventTakesInboxEntry(t *testing.T, s persistence.Store) {
	if _, err := s.CommitSync(&roompb.SyncCursor{NextBatch: "s1"}, []*roompb.Candidate{cand("!a:hs", "$1"), cand("!a:hs", "$2"), cand("!b:hs", "$1")}); err != nil {
		t.Fatal(err)
	}
	name := "app/rooms/!a:hs"
	if err := s.AppendEvent(name, 0, &roompb.InvocationDuplicate{EventId: "$2"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvent(name, 1, &roompb.InvocationQueued{Candidate: cand("!a:hs", "$1")}); err != nil {
		t.Fatal(err)
	}
	// A second write to index 1 is refused and must not take $2.
	if err := s.AppendEvent(name, 1, &roompb.InvocationQueued{Candidate: cand("!a:hs", "$2")}); !errors.Is(err, persistence.ErrConflict) {
		t.Fatalf("second write to an index: %v", err)
	}
	a, _ := s.Inbox("!a:hs")
	if len(a) != 1 || a[0].GetEventId() != "$2" {
		t.Fatalf("inbox of !a after queueing $1 = %v, want only $2", a)
	}
	if b, _ := s.Inbox("!b:hs"); len(b) != 1 {
		t.Fatalf("inbox of another room touched: %v", b)
	}
	acc, err := s.CommitSync(&roompb.SyncCursor{NextBatch: "s2"}, []*roompb.Candidate{cand("!a:hs", "$1")})
	if err != nil || len(acc) != 0 {
		t.Fatalf("a queued event was routed again: %v %v", acc, err)
	}
	// A refused candidate (room overloaded) takes its entry the same way.
	if err := s.AppendEvent(name, 2, &roompb.InvocationRefused{Candidate: cand("!a:hs", "$2"), Reason: "queue_full"}); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Inbox("!a:hs"); len(a) != 0 {
		t.Fatalf("inbox of !a after refusing $2 = %v, want empty", a)
	}
}

// relationsTakeInboxEntries: a queued invocation takes its own entry; an
// applied edit or redaction takes its own, and a release of held replies
// the entry of the permission change that caused it.
func relationsTakeInboxEntries(t *testing.T, s persistence.Store) {
	edit := cand("!a:hs", "$edit")
	edit.ReplacesEventId, edit.OriginalRouted = "$orig", true
	red := cand("!a:hs", "$red")
	red.RedactsEventId = "$orig"
	pl := cand("!a:hs", "$pl")
	pl.Trigger, pl.Body = "power_levels", ""
	if _, err := s.CommitSync(&roompb.SyncCursor{NextBatch: "s1"}, []*roompb.Candidate{cand("!a:hs", "$orig"), edit, red, pl}); err != nil {
		t.Fatal(err)
	}
	name := "app/rooms/!a:hs"
	steps := []proto.Message{
		&roompb.InvocationQueued{Candidate: cand("!a:hs", "$orig")},
		&roompb.InvocationEdited{EventId: "$orig", EditEventId: "$edit", RoomId: "!a:hs"},
		&roompb.InvocationRedacted{EventId: "$orig", RedactionEventId: "$red", RoomId: "!a:hs"},
		&roompb.HeldReleased{EventIds: []string{"$held"}, Reason: "power_levels", RoomId: "!a:hs", CauseEventId: "$pl"},
	}
	for i, ev := range steps {
		if err := s.AppendEvent(name, uint64(i), ev); err != nil {
			t.Fatal(err)
		}
		if a, _ := s.Inbox("!a:hs"); len(a) != len(steps)-1-i {
			t.Fatalf("after %T the inbox holds %d entries, want %d", ev, len(a), len(steps)-1-i)
		}
	}
}

func commitSyncAtomic(t *testing.T, s persistence.Store) {
	if _, err := s.CommitSync(&roompb.SyncCursor{NextBatch: "s1"}, nil); err != nil {
		t.Fatal(err)
	}
	bad := &roompb.Candidate{RoomId: "!a:hs"} // no event ID
	if _, err := s.CommitSync(&roompb.SyncCursor{NextBatch: "s2"}, []*roompb.Candidate{cand("!a:hs", "$1"), bad}); err == nil {
		t.Fatal("invalid candidate accepted")
	}
	cur, _ := s.Cursor()
	if cur.GetNextBatch() != "s1" {
		t.Fatalf("failed commit moved the cursor to %q", cur.GetNextBatch())
	}
	if inbox, _ := s.Inbox("!a:hs"); len(inbox) != 0 {
		t.Fatalf("failed commit left inbox entries: %v", inbox)
	}
}

func commitSyncDoesNotAlias(t *testing.T, s persistence.Store) {
	c := cand("!a:hs", "$1")
	if _, err := s.CommitSync(&roompb.SyncCursor{NextBatch: "s1"}, []*roompb.Candidate{c}); err != nil {
		t.Fatal(err)
	}
	c.Body = "mutated"
	inbox, _ := s.Inbox("!a:hs")
	inbox[0].Body = "mutated too"
	again, _ := s.Inbox("!a:hs")
	if again[0].GetBody() != "hi $1" || c.GetInboxSeq() != 0 {
		t.Fatalf("store aliases caller memory: %v / %v", again[0], c)
	}
}

func botEvents(t *testing.T, s persistence.Store) {
	if ok, err := s.IsBotEvent("!a:hs", "$x"); ok || err != nil {
		t.Fatalf("unknown bot event: %v %v", ok, err)
	}
	if err := s.RecordBotEvent("!a:hs", "$x", "$q"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.IsBotEvent("!a:hs", "$x"); !ok {
		t.Fatal("recorded bot event not found")
	}
	if ok, _ := s.IsBotEvent("!b:hs", "$x"); ok {
		t.Fatal("bot events leak across rooms")
	}
	if r, err := s.RepliedTo("!a:hs", "$q"); r != "$x" || err != nil {
		t.Fatalf("RepliedTo($q) = %q, %v; want $x", r, err)
	}
	if r, _ := s.RepliedTo("!b:hs", "$q"); r != "" {
		t.Fatalf("answers leak across rooms: %q", r)
	}
	if r, _ := s.RepliedTo("!a:hs", "$x"); r != "" {
		t.Fatalf("a reply is not answered by itself: %q", r)
	}
	if err := s.RecordBotEvent("!a:hs", "$notice", ""); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.RepliedTo("!a:hs", ""); r != "" {
		t.Fatalf("an event answering nothing is indexed: %q", r)
	}
}

func providerSnapshotCompaction(t *testing.T, s persistence.Store) {
	p, err := persistence.NewProvider(s, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := p.GetState()
	for i := range 7 {
		st.PersistEvent("r", i, ev(fmt.Sprintf("e%d", i)))
	}
	st.PersistSnapshot("r", 6, &roompb.RoomSnapshot{NextEventIndex: 6})
	snap, idx, ok := st.GetSnapshot("r")
	if !ok || idx != 6 || snap.(*roompb.RoomSnapshot).GetNextEventIndex() != 6 {
		t.Fatalf("GetSnapshot = %v %d %v", snap, idx, ok)
	}
	var replay []string
	st.GetEvents("r", idx, 0, func(e any) { replay = append(replay, e.(*roompb.InvocationDuplicate).GetEventId()) })
	if !slices.Equal(replay, []string{"e6"}) {
		t.Fatalf("replay after snapshot = %v", replay)
	}
	// Compaction removed what the snapshot covers.
	if err := s.Events("r", 0, 0, func(uint64, proto.Message) error { return nil }); !errors.Is(err, persistence.ErrGap) {
		t.Fatalf("events before the snapshot still readable: %v", err)
	}
	if _, err := persistence.NewProvider(s, 0, nil); err == nil {
		t.Fatal("zero snapshot interval accepted")
	}
}

func providerPanicsOnGap(t *testing.T, s persistence.Store) {
	mustAppend(t, s, "r", 0, 2)
	p, _ := persistence.NewProvider(s, 10, nil)
	defer func() {
		r := recover()
		se, ok := r.(*persistence.StorageError)
		if !ok || !errors.Is(se, persistence.ErrGap) {
			t.Fatalf("recovered %v, want *StorageError wrapping ErrGap", r)
		}
	}()
	p.GetEvents("r", 0, 0, func(any) {})
	t.Fatal("GetEvents over a gap returned normally")
}

// closedStoreFails: Close is idempotent, and a closed store refuses work
// with ErrClosed.
func closedStoreFails(t *testing.T, f Factory) {
	s := f.Open(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.AppendEvent("a", 0, ev("x")); !errors.Is(err, persistence.ErrClosed) {
		t.Fatalf("AppendEvent after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Cursor(); !errors.Is(err, persistence.ErrClosed) {
		t.Fatalf("Cursor after Close: %v, want ErrClosed", err)
	}
}

// survivesReopen: events, snapshots, the cursor, the inbox and bot events
// survive closing and reopening the store, and the inbox sequence keeps
// counting.
func survivesReopen(t *testing.T, f Factory) {
	s := f.Open(t)
	mustAppend(t, s, "rooms/!a:hs", 0, 1, 2)
	if err := s.SaveSnapshot("rooms/!a:hs", 2, &roompb.RoomSnapshot{NextEventIndex: 2, Answered: 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CommitSync(&roompb.SyncCursor{NextBatch: "s9", BaselineDone: true}, []*roompb.Candidate{cand("!a:hs", "$1")}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordBotEvent("!a:hs", "$bot", "$1"); err != nil {
		t.Fatal(err)
	}
	s = f.Reopen(t, s)
	t.Cleanup(func() { _ = s.Close() })
	if got := readAll(t, s, "rooms/!a:hs", 0); !slices.Equal(got, []string{"e0", "e1", "e2"}) {
		t.Fatalf("events after reopen = %v", got)
	}
	snap, idx, ok, err := s.LatestSnapshot("rooms/!a:hs")
	if err != nil || !ok || idx != 2 || snap.(*roompb.RoomSnapshot).GetAnswered() != 7 {
		t.Fatalf("snapshot after reopen = %v %d %v %v", snap, idx, ok, err)
	}
	cur, err := s.Cursor()
	if err != nil || cur.GetNextBatch() != "s9" || !cur.GetBaselineDone() {
		t.Fatalf("cursor after reopen = %v %v", cur, err)
	}
	inbox, err := s.Inbox("!a:hs")
	if err != nil || len(inbox) != 1 || inbox[0].GetEventId() != "$1" {
		t.Fatalf("inbox after reopen = %v %v", inbox, err)
	}
	if ok, err := s.IsBotEvent("!a:hs", "$bot"); err != nil || !ok {
		t.Fatalf("bot event after reopen = %v %v", ok, err)
	}
	// The inbox sequence keeps counting after reopen.
	acc, err := s.CommitSync(&roompb.SyncCursor{NextBatch: "s10"}, []*roompb.Candidate{cand("!a:hs", "$2")})
	if err != nil || len(acc) != 1 || acc[0].GetInboxSeq() <= inbox[0].GetInboxSeq() {
		t.Fatalf("seq after reopen: %v %v", acc, err)
	}
}

// barrierCoversEarlierWrites: a barrier taken after writes, and Sync,
// return without error once the writes are on disk; the writes stay
// readable.
func barrierCoversEarlierWrites(t *testing.T, s persistence.Store) {
	mustAppend(t, s, "rooms/!a:hs", 0, 1)
	if err := s.RecordBotEvent("!a:hs", "$bot", "$1"); err != nil {
		t.Fatal(err)
	}
	wait := s.Barrier()
	mustAppend(t, s, "rooms/!a:hs", 2)
	if err := wait(); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	if err := s.Sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if got := readAll(t, s, "rooms/!a:hs", 0); !slices.Equal(got, []string{"e0", "e1", "e2"}) {
		t.Fatalf("events = %v", got)
	}
}
