package room

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages/roompb"
)

func benchPolicy() Policy {
	return Policy{RoomID: "!bench:hs", MaxAttempts: 3, RetryBase: time.Second, RetryMax: time.Minute,
		SendRetryBase: time.Second, SendRetryMax: time.Minute, ErrorReply: func(*roompb.Candidate) []byte { return []byte(`{}`) }}
}

// answeredInvocation drives m through one invocation answered at the
// first attempt and returns the journal events it produced.
func answeredInvocation(m *Machine, k int, now time.Time) []proto.Message {
	var evs []proto.Message
	inputs := []Input{InboxLoaded{Candidates: []*roompb.Candidate{{
		RoomId: "!bench:hs", EventId: fmt.Sprintf("$m%d", k), Sender: "@ann:hs", Body: "Lisa, ping", Trigger: "mention", InboxSeq: uint64(k + 1),
	}}}}
	run := func(out Output) {
		for _, ev := range out.Events {
			evs = append(evs, ev)
			if err := m.Apply(ev); err != nil {
				panic(err)
			}
		}
		for _, eff := range append(out.Early, out.Effects...) {
			switch e := eff.(type) {
			case RequestSlot:
				inputs = append(inputs, SlotGranted{})
			case StartInvocation:
				inputs = append(inputs, InvocationDone{EventID: e.Candidate.GetEventId(), Attempt: e.Attempt, Content: []byte(`{"body":"Pong."}`)})
			case SendReply:
				inputs = append(inputs, SendDone{EventID: e.EventID, ReplyEventID: "$r" + e.EventID})
			}
		}
	}
	for len(inputs) > 0 {
		in := inputs[0]
		inputs = inputs[1:]
		run(m.Decide(in, now))
		for out := m.Pump(now); !out.Empty(); out = m.Pump(now) {
			run(out)
		}
	}
	return evs
}

// BenchmarkMachineInvocation measures the pure room machine deciding and
// applying one whole answered invocation (queued → started → ready →
// sent).
func BenchmarkMachineInvocation(b *testing.B) {
	m := NewMachine(benchPolicy())
	now := time.Unix(1_700_000_000, 0)
	m.Decide(Recovered{}, now)
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		if n := len(answeredInvocation(m, k, now)); n != 4 {
			b.Fatalf("%d events", n)
		}
		k++
	}
}

// BenchmarkStateApply measures replay: folding the journal events of one
// answered invocation into the state, as recovery does.
func BenchmarkStateApply(b *testing.B) {
	src := NewMachine(benchPolicy())
	now := time.Unix(1_700_000_000, 0)
	src.Decide(Recovered{}, now)
	var evs [][]proto.Message
	for k := range 64 {
		evs = append(evs, answeredInvocation(src, k, now))
	}
	var s State
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		if k%len(evs) == 0 {
			s = State{}
		}
		for _, ev := range evs[k%len(evs)] {
			if err := s.Apply(ev); err != nil {
				b.Fatal(err)
			}
		}
		k++
	}
}

// BenchmarkSnapshotRestore measures taking a snapshot and rebuilding the
// state from it (recovery starts from the latest snapshot).
func BenchmarkSnapshotRestore(b *testing.B) {
	m := NewMachine(benchPolicy())
	now := time.Unix(1_700_000_000, 0)
	m.Decide(Recovered{}, now)
	for k := range 300 {
		answeredInvocation(m, k, now)
	}
	b.ReportAllocs()
	for b.Loop() {
		snap := m.Snapshot()
		st := FromSnapshot(snap)
		if len(st.Recent) == 0 {
			b.Fatal("empty recent window")
		}
	}
}
