package main

import (
	"fmt"
	"runtime"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/trail"
)

// trailReport is what the event trail costs with every ring full.
type trailReport struct {
	Rooms   int     `json:"rooms"`
	PerRoom int     `json:"events_per_room"`
	HeapKiB int     `json:"go_heap_kib"`
	RoomKiB float64 `json:"go_heap_per_full_room_kib"`
	EventB  float64 `json:"go_heap_per_event_bytes"`
	Invoked int     `json:"invocations_per_room"`
}

// benchTrail fills the rings of rooms rooms with perRoom events each, as
// a busy Lisa's trail would hold them (Matrix-sized IDs; one event in
// ten an answered invocation with its path and tool counts), and
// measures the Go heap they hold.
func benchTrail(rooms, perRoom int) trailReport {
	before := sampleMemory()
	tr := trail.New(perRoom, nil)
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	invoked := 0
	for r := range rooms {
		room := fmt.Sprintf("!%018d:matrix.example.org", r)
		seen := make([]messages.SeenEvent, 0, perRoom)
		for i := range perRoom {
			verdict := "not_addressed"
			if i%10 == 0 {
				verdict = "mention"
			}
			seen = append(seen, messages.SeenEvent{Room: room, EventID: fmt.Sprintf("$%043d", r*perRoom+i),
				Sender: fmt.Sprintf("@member%04d:matrix.example.org", i%50), Kind: "text", Verdict: verdict})
		}
		tr.Synced(&messages.SyncBatch{Seen: seen}, now)
		for i := 0; i < perRoom; i += 10 {
			ev := seen[i].EventID
			tr.Journaled(room, &roompb.InvocationQueued{Candidate: &roompb.Candidate{EventId: ev, Sender: seen[i].Sender}}, now)
			tr.Journaled(room, &roompb.InvocationStarted{EventId: ev, Attempt: 1}, now)
			tr.Attempted(room, ev, 1, messages.AttemptStats{LLMRequests: 3, Tools: map[string]int{"ok": 2}}, "", now)
			tr.Journaled(room, &roompb.ReplyReady{EventId: ev}, now)
			tr.Journaled(room, &roompb.ReplySent{EventId: ev, ReplyEventId: fmt.Sprintf("$reply%038d", i)}, now.Add(2*time.Second))
			if r == 0 {
				invoked++
			}
		}
	}
	after := sampleMemory()
	runtime.KeepAlive(tr)
	heap := int(after.heapKiB - before.heapKiB)
	return trailReport{Rooms: rooms, PerRoom: perRoom, HeapKiB: heap, Invoked: invoked,
		RoomKiB: float64(heap) / float64(rooms), EventB: float64(heap) * 1024 / float64(rooms*perRoom)}
}
