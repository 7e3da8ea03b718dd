package matrix

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/testkit/fakehs"
)

// TestSkippedEventsRecoveredAfterAFailedSync: a homeserver that fails a
// /sync and then answers the next one with no rooms and a next_batch past
// new events (Dendrite just after its start) loses nothing: after a failed
// /sync every allowed room is read back to its last seen event. Without the
// failure the same answer is trusted; the second case shows the events
// such an answer hides, so the test notices if the fake stops hiding them.
// A new process after an unclean stop cannot know whether a /sync failed
// before: the daemon asks for the same check (VerifyNext).
func TestSkippedEventsRecoveredAfterAFailedSync(t *testing.T) {
	const (
		bot, device, token = "@lisa:fake.test", "LISA", "fake-token"
		human              = "@ann:fake.test"
		roomA, roomB       = "!a:fake.test", "!b:fake.test"
		// roomC is allowed but Lisa is not in it: reading it back is
		// refused, which must not stop the sync.
		roomC = "!not-joined:fake.test"
	)
	for _, c := range []struct {
		name      string
		failFirst bool
		restarted bool // a new process after an unclean stop (VerifyNext)
		want      int
	}{
		{"a failed sync before the skip: recovered", true, false, 3},
		{"a restart after an unclean stop: recovered", false, true, 3},
		{"the hazard: a skip without a failure", false, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			hs, post := mentionsHS(t, fakehs.Options{UserID: bot, DeviceID: device, Token: token}, human, roomA, roomB)
			post(roomA, "history, before the baseline")
			cli, err := Connect(ctx, hs.URL(), bot, device, token, nil)
			if err != nil {
				t.Fatal(err)
			}
			newSource := func() *Source {
				return NewSource(cli, SyncOptions{Timeout: 100 * time.Millisecond, TimelineLimit: 20, GapPageLimit: 5, AllowedRooms: []string{roomA, roomB, roomC}},
					&emptyLedger{}, slog.New(slog.DiscardHandler), time.Now)
			}
			src := newSource()
			base, err := src.Next(ctx, &roompb.SyncCursor{})
			if err != nil || len(base.Candidates) != 0 {
				t.Fatalf("baseline: %v, %d candidates", err, len(base.Candidates))
			}
			post(roomA, "Lisa, one?")
			post(roomB, "Lisa, two?")
			post(roomA, "Lisa, three?")
			if c.failFirst {
				hs.FailSyncs(1)
			}
			hs.SkipSyncs(1)
			cur := base.Cursor
			if c.failFirst {
				if _, err := src.Next(ctx, cur); err == nil {
					t.Fatal("the injected failure was not reported")
				}
			}
			if c.restarted {
				src = newSource()
				src.VerifyNext()
			}
			if got := src.VerifyPending(); got != (c.failFirst || c.restarted) {
				t.Fatalf("VerifyPending before the skipping answer: %v", got)
			}
			b, err := src.Next(ctx, cur)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(b.Candidates); got != c.want {
				t.Fatalf("%d candidates after the skipping answer, want %d", got, c.want)
			}
			// Exactly the hidden mentions, each once, and nothing from
			// before the baseline (room B, empty then, has no last seen
			// event: only what came after the last commit counts).
			got := map[string]int{}
			for _, cand := range b.Candidates {
				got[cand.GetBody()]++
			}
			for _, body := range []string{"Lisa, one?", "Lisa, two?", "Lisa, three?"} {
				if c.want > 0 && got[body] != 1 {
					t.Fatalf("candidates %v: want %q once", got, body)
				}
			}
			if src.VerifyPending() {
				t.Fatal("a complete answer left a check pending")
			}
			// Until a request starts from its cursor, a checked answer may
			// not have been committed.
			if got := src.UncommittedCheck(); got != (c.failFirst || c.restarted) {
				t.Fatalf("UncommittedCheck after the answer: %v", got)
			}
			// The next answer is trusted again and brings only what is new.
			post(roomB, "Lisa, four?")
			b2, err := src.Next(ctx, b.Cursor)
			if err != nil || len(b2.Candidates) != 1 || b2.Candidates[0].GetBody() != "Lisa, four?" {
				t.Fatalf("next sync: %v, %+v", err, b2)
			}
			if src.UncommittedCheck() {
				t.Fatal("a request from the checked answer's cursor did not count it as committed")
			}
		})
	}
}

// TestStoppingLeavesVerifyAlone: a /sync that Lisa cancels to stop says
// nothing about the homeserver: it neither sets nor clears a pending
// check. Any other failure, a watchdog's cancellation included, sets it.
func TestStoppingLeavesVerifyAlone(t *testing.T) {
	const bot, device, token = "@lisa:fake.test", "LISA", "fake-token"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hs := fakehs.New(fakehs.Options{UserID: bot, DeviceID: device, Token: token})
	if err := hs.Listen(); err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	hs.CreateRoom("!a:fake.test", nil)
	cli, err := Connect(ctx, hs.URL(), bot, device, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := NewSource(cli, SyncOptions{Timeout: 100 * time.Millisecond, TimelineLimit: 20, GapPageLimit: 5, AllowedRooms: []string{"!a:fake.test"}},
		&emptyLedger{}, slog.New(slog.DiscardHandler), time.Now)
	base, err := src.Next(ctx, &roompb.SyncCursor{})
	if err != nil {
		t.Fatal(err)
	}
	cancelled := func(cause error) context.Context {
		c, stop := context.WithCancelCause(ctx)
		stop(cause)
		return c
	}
	for _, step := range []struct {
		name  string
		ctx   context.Context
		fails bool
		want  bool
	}{
		{"stopping, nothing pending", cancelled(messages.ErrStopping), true, false},
		{"a watchdog's cancellation", cancelled(context.Canceled), true, true},
		{"stopping, a check pending", cancelled(messages.ErrStopping), true, true},
		{"a complete answer", ctx, false, false},
	} {
		_, err := src.Next(step.ctx, base.Cursor)
		if (err != nil) != step.fails {
			t.Fatalf("%s: error %v", step.name, err)
		}
		if got := src.VerifyPending(); got != step.want {
			t.Fatalf("%s: VerifyPending = %v, want %v", step.name, got, step.want)
		}
	}
}

// TestVerifyRepeatsFailedReads: after an unclean stop the first answer
// reads every allowed room back, and one failed read fails the whole
// answer. A read that fails transiently is repeated in place, so a
// homeserver that fails some requests still lets the check complete (at a
// 40 % failure rate, seven reads that each had to succeed at once kept
// Lisa from ever completing one in a chaos campaign). A homeserver that
// keeps failing fails the answer, and the check stays pending.
func TestVerifyRepeatsFailedReads(t *testing.T) {
	const (
		bot, device, token = "@lisa:fake.test", "LISA", "fake-token"
		human              = "@ann:fake.test"
		roomA, roomB       = "!a:fake.test", "!b:fake.test"
	)
	for _, c := range []struct {
		name     string
		failures int // GET /messages requests that fail with 503
		ok       bool
	}{
		{"no failures", 0, true},
		{"three failures, each read repeated", 3, true},
		// Both rooms are read at once (fetchParallel): every attempt of
		// both reads fails.
		{"every attempt of every read fails", 2 * readAttempts, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			hs, post := mentionsHS(t, fakehs.Options{UserID: bot, DeviceID: device, Token: token}, human, roomA, roomB)
			cli, err := Connect(ctx, hs.URL(), bot, device, token, nil)
			if err != nil {
				t.Fatal(err)
			}
			newSource := func() *Source {
				return NewSource(cli, SyncOptions{Timeout: 100 * time.Millisecond, TimelineLimit: 20, GapPageLimit: 5,
					AllowedRooms: []string{roomA, roomB}, ReadRetryDelay: time.Millisecond},
					&emptyLedger{}, slog.New(slog.DiscardHandler), time.Now)
			}
			base, err := newSource().Next(ctx, &roompb.SyncCursor{})
			if err != nil {
				t.Fatal(err)
			}
			for _, room := range []string{roomA, roomB} {
				post(room, "Lisa, in "+room+"?")
			}
			hs.SkipSyncs(1) // the answer hides both mentions
			src := newSource()
			src.VerifyNext()
			hs.FailMessages(c.failures)
			before := hs.Counts()["messages"]
			b, err := src.Next(ctx, base.Cursor)
			reads := hs.Counts()["messages"] - before
			if !c.ok {
				var le *messages.Error
				if err == nil || !errors.As(err, &le) || le.Permanent {
					t.Fatalf("want a transient failure, got %v", err)
				}
				if reads != 2*readAttempts {
					t.Fatalf("%d reads, want %d attempts of each room's read", reads, readAttempts)
				}
				if !src.VerifyPending() {
					t.Fatal("a failed check is no longer pending")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Candidates) != 2 {
				t.Fatalf("%d candidates, want the 2 hidden mentions", len(b.Candidates))
			}
			if want := 2 + c.failures; reads != want {
				t.Fatalf("%d reads, want one per room plus one per failure (%d)", reads, want)
			}
			if src.VerifyPending() {
				t.Fatal("a complete check is still pending")
			}
		})
	}
}

// TestCheckSpreadOverAnswers: after an unclean stop, the rooms to read
// back are read over several answers (checkChunk of them each, besides
// the rooms an answer brings events of, which are read back before
// their events are classified), with no long poll until every room is
// read; every hidden mention comes out exactly once, in its room's
// order, also in a room that had seen nothing before the crash and is
// read back answers later. The check is pending until the last room is
// read, and uncommitted until a request starts from that answer.
func TestCheckSpreadOverAnswers(t *testing.T) {
	const (
		bot, device, token     = "@lisa:fake.test", "LISA", "fake-token"
		human                  = "@ann:fake.test"
		roomA, roomB, roomC, D = "!a:fake.test", "!b:fake.test", "!c:fake.test", "!d:fake.test"
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hs, post := mentionsHS(t, fakehs.Options{UserID: bot, DeviceID: device, Token: token}, human, roomA, roomB, roomC, D)
	post(roomA, "history, before the baseline")
	post(D, "more history")
	cli, err := Connect(ctx, hs.URL(), bot, device, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A long poll that would hold an answer for a minute: the test
	// fails by its deadline if a request long-polls with checks pending.
	opts := SyncOptions{Timeout: time.Minute, TimelineLimit: 20, GapPageLimit: 5, AllowedRooms: []string{roomA, roomB, roomC, D}}
	base, err := NewSource(cli, opts, &emptyLedger{}, slog.New(slog.DiscardHandler), time.Now).Next(ctx, &roompb.SyncCursor{})
	if err != nil {
		t.Fatal(err)
	}
	post(roomA, "one")
	post(roomC, "two") // room C had nothing before: no last seen event
	post(D, "three")
	hs.SkipSyncs(1)
	src := NewSource(cli, opts, &emptyLedger{}, slog.New(slog.DiscardHandler), time.Now)
	src.checkChunk = 1
	src.VerifyNext() // a start after an unclean stop

	bodies := func(b *messages.SyncBatch) []string {
		var out []string
		for _, c := range b.Candidates {
			out = append(out, c.GetBody())
		}
		return out
	}
	cur := base.Cursor
	next := func(name string, want ...string) {
		t.Helper()
		b, err := src.Next(ctx, cur)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := bodies(b); !slices.Equal(got, want) {
			t.Fatalf("%s: candidates %v, want %v", name, got, want)
		}
		cur = b.Cursor
	}
	// The skipping answer brings no room: it reads back one pending room.
	next("first answer", "one")
	if !src.VerifyPending() {
		t.Fatal("rooms left to read back, but no check pending")
	}
	// Room D comes with a new event while it is still pending: it is read
	// back in this answer, its hidden mention before the new one; and one
	// more pending room (B, with nothing hidden) is read.
	post(D, "four")
	next("second answer", "three", "four")
	// The last pending room, C: its mention, hidden answers ago, is kept.
	next("third answer", "two")
	if src.VerifyPending() {
		t.Fatal("every room read back, but a check still pending")
	}
	if !src.UncommittedCheck() {
		t.Fatal("the last checked answer counted as committed before a request started from it")
	}
	post(roomB, "five")
	next("a trusted answer", "five")
	if src.UncommittedCheck() {
		t.Fatal("a request from the checked answer's cursor did not count it as committed")
	}
}

// mentionsHS starts a fake homeserver for the account of o, holding rooms
// with human in each (as "Ann"), and closes it when the test ends; post
// sends a message from human that mentions the account.
func mentionsHS(t *testing.T, o fakehs.Options, human string, rooms ...string) (*fakehs.Server, func(room, body string)) {
	t.Helper()
	hs := fakehs.New(o)
	if err := hs.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hs.Close)
	for _, r := range rooms {
		hs.CreateRoom(r, map[string]string{human: "Ann"})
	}
	post := func(room, body string) {
		t.Helper()
		content := map[string]any{"msgtype": "m.text", "body": body, "m.mentions": map[string]any{"user_ids": []string{o.UserID}}}
		if _, _, err := hs.Post(room, human, content); err != nil {
			t.Fatal(err)
		}
	}
	return hs, post
}

// TestAnchorIgnoresTypesTheServerShouldHaveFiltered: a homeserver whose
// /sync ignores the timeline filter's types (Continuwuity, conduwuit)
// ends a room's timeline with a reaction. The cursor's anchor is still
// the newest message, so back-fill after a limited timeline meets it:
// every mention found, no open gap. With the reaction as the anchor, a
// filtered /messages never shows it and the back-fill reports a gap.
func TestAnchorIgnoresTypesTheServerShouldHaveFiltered(t *testing.T) {
	const (
		bot, device, token = "@lisa:fake.test", "LISA", "fake-token"
		human, room        = "@ann:fake.test", "!a:fake.test"
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hs, post := mentionsHS(t, fakehs.Options{UserID: bot, DeviceID: device, Token: token, IgnoreSyncTimelineTypes: true}, human, room)
	post(room, "history, before the baseline")
	cli, err := Connect(ctx, hs.URL(), bot, device, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := NewSource(cli, SyncOptions{Timeout: 100 * time.Millisecond, TimelineLimit: 2, GapPageLimit: 5, AllowedRooms: []string{room}},
		&emptyLedger{}, slog.New(slog.DiscardHandler), time.Now)
	base, err := src.Next(ctx, &roompb.SyncCursor{})
	if err != nil {
		t.Fatal(err)
	}
	post(room, "Lisa, first?")
	first := hs.Events(room)[len(hs.Events(room))-1].ID
	if _, _, err := hs.PostEvent(room, human, "m.reaction", map[string]any{"m.relates_to": map[string]any{"rel_type": "m.annotation", "event_id": first, "key": "👍"}}); err != nil {
		t.Fatal(err)
	}
	one, err := src.Next(ctx, base.Cursor)
	if err != nil || len(one.Candidates) != 1 {
		t.Fatalf("first answer: %v, %d candidates", err, len(one.Candidates))
	}
	if got := one.Cursor.GetLastEventIds()[room]; got != first {
		t.Fatalf("anchor %s, want the newest message %s (not the reaction)", got, first)
	}
	for _, q := range []string{"Lisa, two?", "Lisa, three?", "Lisa, four?", "Lisa, five?"} {
		post(room, q)
	}
	two, err := src.Next(ctx, one.Cursor)
	if err != nil {
		t.Fatal(err)
	}
	if len(two.Candidates) != 4 || len(two.GapRooms) != 0 {
		t.Fatalf("after a limited timeline: %d candidates (want 4), gap rooms %v (want none)", len(two.Candidates), two.GapRooms)
	}
}
