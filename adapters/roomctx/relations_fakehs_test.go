package roomctx

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/testkit/fakehs"
)

// TestThreadPagesWithoutNextBatch: Continuwuity filters /relations after
// taking the limit and sets next_batch only when the filtered page is
// still full (paginate_relations_with_filter; docs/homeservers.md), so a
// page that lost an event to its filters ends the walk although older
// thread events exist. Lisa takes the missing next_batch as "no more
// that I can see": the context is shorter, never wrong — the root, the
// events she was given, the invocation, nothing after it, nothing twice,
// and no fallback to the room timeline. The same thread on a server that
// pages correctly gives the older events too, so the test notices if the
// fake stops cutting the walk short.
func TestThreadPagesWithoutNextBatch(t *testing.T) {
	for _, c := range []struct {
		name  string
		modes fakehs.RelationsModes
		want  []string
		pages int
	}{
		{"Continuwuity: short page, no next_batch", fakehs.RelationsModes{FilterAfterLimit: true, NextBatchNewest: true},
			[]string{"root", "thread 10", "Lisa, which one?"}, 1},
		{"correct paging", fakehs.RelationsModes{},
			// The hidden event filtered before the limit: the first page
			// is full and holds thread 9, which takes the root's place
			// (max_events 3 holds three).
			[]string{"thread 9", "thread 10", "Lisa, which one?"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			const human, room = "@ann:hs", "!t:hs"
			hs := fakehs.New(fakehs.Options{UserID: testBot, DeviceID: "LISA", Token: "tok", Relations: c.modes})
			if err := hs.Listen(); err != nil {
				t.Fatal(err)
			}
			defer hs.Close()
			hs.CreateRoom(room, map[string]string{human: "Ann"})
			post := func(body, root string) string {
				t.Helper()
				content := map[string]any{"msgtype": "m.text", "body": body}
				if root != "" {
					content["m.relates_to"] = map[string]any{"rel_type": "m.thread", "event_id": root}
				}
				evID, _, err := hs.Post(room, human, content)
				if err != nil {
					t.Fatal(err)
				}
				return evID
			}
			root := post("root", "")
			for i := 1; i <= 10; i++ {
				post(fmt.Sprintf("thread %d", i), root)
			}
			inv := post("Lisa, which one?", root)
			var after []string
			for i := 1; i <= 4; i++ {
				after = append(after, post(fmt.Sprintf("AFTER %d", i), root))
			}
			hs.HideFromRelations(after[1]) // in the first page
			cli, err := matrix.Connect(ctx, hs.URL(), testBot, "LISA", "tok", nil)
			if err != nil {
				t.Fatal(err)
			}
			var ts int64
			for _, e := range hs.Events(room) {
				if e.ID == inv {
					ts = e.TS
				}
			}
			cand := &roompb.Candidate{RoomId: room, EventId: inv, Sender: human, OriginTsMs: ts, Trigger: "mention",
				Body: "Lisa, which one?", ThreadRootEventId: root}
			// MaxEvents 3: pages of 6 (the limit is 2 × max_events), the
			// first holding four events after the invocation.
			out, err := New(cli, testBot, Limits{MaxEvents: 3, MaxCharacters: 24000, MaxEventCharacters: 4000, MaxReplyDepth: 2}).Build(ctx, cand)
			if err != nil {
				t.Fatal(err)
			}
			got := bodies(t, out)
			if !slices.Equal(got, c.want) {
				t.Fatalf("thread block = %q, want %q\n%s", got, c.want, out)
			}
			if strings.Contains(out, "AFTER") {
				t.Fatalf("an event after the invocation is in its context:\n%s", out)
			}
			n := hs.Counts()
			if n["relations"] != c.pages || n["context"] != 0 || n["messages"] != 0 {
				b, _ := json.Marshal(n)
				t.Fatalf("requests %s: want %d page(s) of /relations and no room timeline", b, c.pages)
			}
		})
	}
}
