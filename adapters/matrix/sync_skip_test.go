package matrix

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/testkit/fakehs"
)

// TestSkippedEventsRecoveredAfterAFailedSync: a homeserver that fails a
// /sync and then answers the next one with no rooms and a next_batch past
// new events (Dendrite just after its start) loses nothing: after a failed
// /sync every allowed room is read back to its last seen event. Without the
// failure the same answer is trusted; the second case shows the events
// such an answer hides, so the test notices if the fake stops hiding them.
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
		want      int
	}{
		{"a failed sync before the skip: recovered", true, 3},
		{"the hazard: a skip without a failure", false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			hs := fakehs.New(fakehs.Options{UserID: bot, DeviceID: device, Token: token})
			if err := hs.Listen(); err != nil {
				t.Fatal(err)
			}
			defer hs.Close()
			hs.CreateRoom(roomA, map[string]string{human: "Ann"})
			hs.CreateRoom(roomB, map[string]string{human: "Ann"})
			post := func(room, body string) {
				t.Helper()
				content := map[string]any{"msgtype": "m.text", "body": body, "m.mentions": map[string]any{"user_ids": []string{bot}}}
				if _, _, err := hs.Post(room, human, content); err != nil {
					t.Fatal(err)
				}
			}
			post(roomA, "history, before the baseline")
			cli, err := Connect(ctx, hs.URL(), bot, device, token, nil)
			if err != nil {
				t.Fatal(err)
			}
			src := NewSource(cli, SyncOptions{Timeout: 100 * time.Millisecond, TimelineLimit: 20, GapPageLimit: 5, AllowedRooms: []string{roomA, roomB, roomC}},
				&emptyLedger{}, slog.New(slog.DiscardHandler), time.Now)
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
			// The next answer is trusted again and brings only what is new.
			post(roomB, "Lisa, four?")
			b2, err := src.Next(ctx, b.Cursor)
			if err != nil || len(b2.Candidates) != 1 || b2.Candidates[0].GetBody() != "Lisa, four?" {
				t.Fatalf("next sync: %v, %+v", err, b2)
			}
		})
	}
}
