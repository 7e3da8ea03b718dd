package matrix

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// topoEvent is one event of dendritePages' room: its place in the room's
// topology (depth) and in the server's stream.
type topoEvent struct {
	id, sender string
	depth      int
	stream     int
	txnID      string
}

// dendritePages serves GET /messages backwards the way Dendrite v0.13.8
// does: a page is the next limit events by (depth, stream) descending from
// the token, of every type and sender (the filter is applied to the page
// afterwards: syncapi/storage/shared GetEventsInTopologicalRange), and the
// next token is the last event's position "decremented" to one depth below
// it (routing/messages.go retrieveEvents, types.TopologyToken.Decrement),
// which skips the events of that depth the page did not reach.
func dendritePages(t *testing.T, events []topoEvent) (*httptest.Server, *[]int) {
	t.Helper()
	sorted := append([]topoEvent(nil), events...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].depth != sorted[j].depth {
			return sorted[i].depth > sorted[j].depth
		}
		return sorted[i].stream > sorted[j].stream
	})
	var limits []int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		limit, _ := strconv.Atoi(q.Get("limit"))
		limits = append(limits, limit)
		var filter struct {
			Senders []string `json:"senders"`
		}
		_ = json.Unmarshal([]byte(q.Get("filter")), &filter)
		maxD, maxS := 1<<40, 1<<40
		if from := q.Get("from"); from != "" {
			if _, err := fmt.Sscanf(from, "t%d-%d", &maxD, &maxS); err != nil {
				t.Errorf("token %q", from)
			}
		}
		var page []topoEvent
		for _, e := range sorted {
			if (e.depth < maxD && e.depth > 0) || (e.depth == maxD && e.stream <= maxS) {
				page = append(page, e)
				if len(page) == limit {
					break
				}
			}
		}
		resp := map[string]any{"start": q.Get("from"), "chunk": []any{}}
		var chunk []any
		for _, e := range page {
			if len(filter.Senders) > 0 && filter.Senders[0] != e.sender {
				continue
			}
			chunk = append(chunk, map[string]any{"event_id": e.id, "sender": e.sender, "type": "m.room.message",
				"room_id": "!r:hs", "origin_server_ts": 1_700_000_000_000 + e.stream,
				"content": map[string]any{"msgtype": "m.text", "body": "x"}, "unsigned": map[string]any{"transaction_id": e.txnID}})
		}
		if chunk != nil {
			resp["chunk"] = chunk
		}
		if len(page) > 0 {
			last := page[len(page)-1]
			resp["end"] = fmt.Sprintf("t%d-%d", last.depth-1, last.stream+1000)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	}))
	t.Cleanup(srv.Close)
	return srv, &limits
}

// TestFindReplyAcrossDendritePageBoundary: Lisa's reply shares its depth
// with a member's message that ends a page of 100 (they posted at once);
// Dendrite's next page starts one depth lower, so a scan in pages of 100
// never sees the reply. It is found by the second pass, and it would have
// been sent twice otherwise. The shape was met in the chaos campaign of
// 6 December (see scanPageSizes).
func TestFindReplyAcrossDendritePageBoundary(t *testing.T) {
	const lisa, human = "@lisa:hs", "@human:hs"
	var events []topoEvent
	stream := 0
	// 150 events at depths 150..1, one per depth, alternating senders;
	// at depth 100 (the 51st from the top) a member's message and Lisa's
	// reply share the depth, the member's with the higher stream position.
	for d := 150; d >= 1; d-- {
		stream++
		sender := human
		if d%2 == 0 {
			sender = lisa
		}
		events = append(events, topoEvent{id: fmt.Sprintf("$e%d", d), sender: sender, depth: d, stream: 1000 - stream})
	}
	// Make the page of 100 end exactly on the member's message at the
	// shared depth: 99 events above it.
	events = append(events, topoEvent{id: "$reply", sender: lisa, depth: 51, stream: 1, txnID: "lisa_txn"})
	for i := range events {
		if events[i].id == "$e51" {
			events[i].sender, events[i].stream = human, 5000
		}
	}
	srv, limits := dendritePages(t, events)
	cli, err := mautrix.NewClient(srv.URL, id.UserID(lisa), "token")
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{cli: cli}

	// The bug as served: pages of 100 never return the reply.
	seen := map[string]bool{}
	from := ""
	for range 10 {
		resp, err := cli.Messages(context.Background(), "!r:hs", from, "", mautrix.DirectionBackward, nil, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.Chunk {
			seen[string(e.ID)] = true
		}
		if resp.End == "" || len(resp.Chunk) == 0 {
			break
		}
		from = resp.End
	}
	if seen["$reply"] || len(seen) != len(events)-1 {
		t.Fatalf("the fake does not skip the reply as Dendrite does: saw %d of %d, reply %v", len(seen), len(events), seen["$reply"])
	}

	*limits = nil
	got, found, err := c.FindReply(context.Background(), "!r:hs", "$question", "lisa_txn")
	if err != nil || !found || got != "$reply" {
		t.Fatalf("FindReply = %q, %v, %v; want the reply hidden by the page boundary", got, found, err)
	}
	if (*limits)[0] != scanPageSizes[0] || (*limits)[len(*limits)-1] != scanPageSizes[1] {
		t.Errorf("page sizes asked: %v, want a pass of %d then one of %d", *limits, scanPageSizes[0], scanPageSizes[1])
	}
}

// pageBoundaryRoom is 150 events, one per depth, and a member's mention
// sharing depth 51 with another message that ends Dendrite's first page of
// 100, so that pages of 100 never return the mention.
func pageBoundaryRoom() []topoEvent {
	var events []topoEvent
	for d := 150; d >= 1; d-- {
		events = append(events, topoEvent{id: fmt.Sprintf("$e%d", d), sender: "@human:hs", depth: d, stream: 1000 + d})
	}
	events[99].stream = 5000 // $e51: the last event of the first page of 100
	return append(events, topoEvent{id: "$mention", sender: "@human:hs", depth: 51, stream: 1})
}

// TestBackfillAcrossDendritePageBoundary: a gap read in pages of 100 would
// lose the mention the page boundary hides; the second read finds it, and
// the merged gap holds every event once, oldest first.
func TestBackfillAcrossDendritePageBoundary(t *testing.T) {
	events := pageBoundaryRoom()
	srv, limits := dendritePages(t, events)
	cli, err := mautrix.NewClient(srv.URL, "@lisa:hs", "token")
	if err != nil {
		t.Fatal(err)
	}
	src := NewSource(&Client{cli: cli}, SyncOptions{TimelineLimit: 100, GapPageLimit: 5}, &emptyLedger{}, slog.New(slog.DiscardHandler), time.Now)
	got, closed, err := src.backfill(context.Background(), "!r:hs", "", "")
	if err != nil || !closed {
		t.Fatalf("backfill: closed %v, %v", closed, err)
	}
	ids := map[id.EventID]int{}
	for i, e := range got {
		if _, dup := ids[e.ID]; dup {
			t.Fatalf("%s twice", e.ID)
		}
		ids[e.ID] = i
	}
	if _, ok := ids["$mention"]; !ok || len(got) != len(events) {
		t.Fatalf("backfill returned %d of %d events, the mention: %v (page sizes %v)", len(got), len(events), ok, *limits)
	}
	if ids["$e150"] != len(got)-1 || ids["$e1"] != 0 || ids["$e50"] > ids["$e51"] || ids["$e51"] > ids["$e52"] {
		t.Errorf("not oldest first: $e1 at %d, $e51 at %d, $e150 at %d", ids["$e1"], ids["$e51"], ids["$e150"])
	}
}

// TestMergeOrdered: two reads that each miss an event the other has.
func TestMergeOrdered(t *testing.T) {
	ev := func(ids ...string) []*event.Event {
		var out []*event.Event
		for _, s := range ids {
			out = append(out, &event.Event{ID: id.EventID(s)})
		}
		return out
	}
	for _, tc := range []struct{ a, b, want []string }{
		{[]string{"1", "2", "4"}, []string{"1", "3", "4"}, []string{"1", "2", "3", "4"}},
		{[]string{"1", "2", "3"}, []string{"1", "2", "3"}, []string{"1", "2", "3"}},
		{nil, []string{"1"}, []string{"1"}},
		{[]string{"1", "3"}, []string{"2", "3", "4"}, []string{"1", "2", "3", "4"}},
	} {
		var got []string
		for _, e := range mergeOrdered(ev(tc.a...), ev(tc.b...)) {
			got = append(got, string(e.ID))
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("mergeOrdered(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
