package matrix

import (
	"context"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/testkit/fakehs"
)

// modesRig is a sync source on a fake homeserver in the given /sync
// modes, past its baseline, with one mention answered before it.
type modesRig struct {
	hs   *fakehs.Server
	src  *Source
	post func(room, body string)
	cur  *roompb.SyncCursor
}

const modesRoom = "!m:fake.test"

func newModesRig(ctx context.Context, t *testing.T, modes fakehs.SyncModes, limit int) *modesRig {
	t.Helper()
	const bot, device, token, human = "@lisa:fake.test", "LISA", "fake-token", "@ann:fake.test"
	hs, post := mentionsHS(t, fakehs.Options{UserID: bot, DeviceID: device, Token: token, Sync: modes}, human, modesRoom)
	post(modesRoom, "Lisa, history before the baseline?")
	cli, err := Connect(ctx, hs.URL(), bot, device, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := NewSource(cli, SyncOptions{Timeout: 50 * time.Millisecond, TimelineLimit: limit, GapPageLimit: 5, AllowedRooms: []string{modesRoom}},
		&emptyLedger{}, slog.New(slog.DiscardHandler), time.Now)
	base, err := src.Next(ctx, &roompb.SyncCursor{})
	if err != nil || len(base.Candidates) != 0 {
		t.Fatalf("baseline: %v, %d candidates", err, len(base.Candidates))
	}
	post(modesRoom, "Lisa, answered before?")
	b, err := src.Next(ctx, base.Cursor)
	if err != nil || len(b.Candidates) != 1 {
		t.Fatalf("first answer: %v, %+v", err, b)
	}
	return &modesRig{hs: hs, src: src, post: post, cur: b.Cursor}
}

func bodies(b *messages.SyncBatch) map[string]int {
	got := map[string]int{}
	for _, c := range b.Candidates {
		got[c.GetBody()]++
	}
	return got
}

// TestUnparsableSinceIsAnInitialSync: the Conduit family answers a since
// it cannot parse with an initial sync (no M_UNKNOWN_POS). Its timeline
// ends with events Lisa has seen: her cursor's anchor and what came
// before it are not new, so only the mention after it is a candidate.
func TestUnparsableSinceIsAnInitialSync(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newModesRig(ctx, t, fakehs.SyncModes{BadSinceIsInitial: true}, 20)
	r.post(modesRoom, "Lisa, new?")
	bad := &roompb.SyncCursor{NextBatch: "not-a-token-of-this-server", BaselineDone: true, UpdatedAtMs: r.cur.GetUpdatedAtMs(),
		LastEventIds: maps.Clone(r.cur.GetLastEventIds())}
	b, err := r.src.Next(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	if got := bodies(b); len(got) != 1 || got["Lisa, new?"] != 1 {
		t.Fatalf("candidates %v: want only the new mention (no history, nothing answered again)", got)
	}
	if b.Cursor.GetNextBatch() != r.hs.Head() {
		t.Fatalf("cursor %q, want the server's head %q", b.Cursor.GetNextBatch(), r.hs.Head())
	}
}

// TestSinceAheadOfTheServer: a since past the server's head (a database
// restored from a backup) is answered with nothing and a lower next_batch
// (Continuwuity) or served from the head (Tuwunel). Lisa takes the
// server's next_batch, so what is posted afterwards arrives at once.
func TestSinceAheadOfTheServer(t *testing.T) {
	for _, mode := range []fakehs.AheadSince{fakehs.AheadSinceEmpty, fakehs.AheadSinceClamp} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r := newModesRig(ctx, t, fakehs.SyncModes{AheadSince: mode}, 20)
		ahead := &roompb.SyncCursor{NextBatch: "s999", BaselineDone: true, UpdatedAtMs: r.cur.GetUpdatedAtMs(), LastEventIds: r.cur.GetLastEventIds()}
		b, err := r.src.Next(ctx, ahead)
		if err != nil || len(b.Candidates) != 0 || b.Cursor.GetNextBatch() != r.hs.Head() {
			t.Fatalf("mode %d: %v, %+v", mode, err, b)
		}
		r.post(modesRoom, "Lisa, after the restore?")
		b, err = r.src.Next(ctx, b.Cursor)
		if got := bodies(b); err != nil || len(got) != 1 || got["Lisa, after the restore?"] != 1 {
			t.Fatalf("mode %d: %v, candidates %v", mode, err, got)
		}
		cancel()
	}
}

// TestFixedAndFilteredTimelineLimit: conduwuit's timeline limit fixed at
// 10 whatever Lisa asks, and Tuwunel's types filtered after the limit (a
// limited timeline with none of the mentions) both lose nothing: a
// limited timeline is back-filled from prev_batch to the anchor.
func TestFixedAndFilteredTimelineLimit(t *testing.T) {
	for _, c := range []struct {
		name  string
		modes fakehs.SyncModes
		limit int
	}{
		{"fixed limit 10 (conduwuit)", fakehs.SyncModes{FixedTimelineLimit: 10}, 50},
		{"filter after the limit (Tuwunel)", fakehs.SyncModes{FilterAfterLimit: true}, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r := newModesRig(ctx, t, c.modes, c.limit)
			want := map[string]int{}
			for i := range 15 {
				body := "Lisa, question " + string(rune('a'+i)) + "?"
				r.post(modesRoom, body)
				want[body] = 1
			}
			for range 8 { // the newest events are not messages
				if _, _, err := r.hs.PostEvent(modesRoom, "@ann:fake.test", "m.reaction", map[string]any{}); err != nil {
					t.Fatal(err)
				}
			}
			b, err := r.src.Next(ctx, r.cur)
			if err != nil {
				t.Fatal(err)
			}
			if got := bodies(b); !maps.Equal(got, want) {
				t.Fatalf("candidates %v, want each of the 15 questions once", got)
			}
		})
	}
}
