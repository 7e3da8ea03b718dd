package main

import (
	"testing"
	"time"
)

// TestSegments: the path is split at the first /sync, the first of the two
// requests Lisa sends side by side, the arrival and answer of the first
// LLM request after them, and the send; a missing point drops the sample.
func TestSegments(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ms := time.Millisecond
	llm := []llmRound{{at(5), at(7)}}
	want := []time.Duration{1 * ms, 2 * ms, 2 * ms, 2 * ms, 3 * ms}
	cases := []struct {
		name   string
		pts    []tracePoint
		rounds []llmRound
		want   []time.Duration
		wantOK bool
	}{
		{"context first", []tracePoint{{"sync", at(1)}, {"typing", at(2)}, {"context", at(3)}, {"joined_members", at(4)}, {"typing", at(9)}, {"send", at(10)}, {"typing", at(11)}},
			llm, want, true},
		{"members first, typing off after the send", []tracePoint{{"sync", at(1)}, {"joined_members", at(3)}, {"context", at(4)}, {"send", at(10)}, {"typing", at(11)}},
			llm, want, true},
		{"earlier points and rounds ignored", []tracePoint{{"sync", at(-5)}, {"sync", at(1)}, {"context", at(3)}, {"joined_members", at(3)}, {"send", at(10)}},
			[]llmRound{{at(-4), at(-3)}, {at(5), at(7)}}, want, true},
		{"no members", []tracePoint{{"sync", at(1)}, {"context", at(3)}, {"send", at(10)}}, llm, nil, false},
		{"no LLM request", []tracePoint{{"sync", at(1)}, {"context", at(3)}, {"joined_members", at(3)}, {"send", at(10)}}, nil, nil, false},
		{"no send", []tracePoint{{"sync", at(1)}, {"context", at(3)}, {"joined_members", at(3)}}, llm, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := segments(t0, c.pts, c.rounds)
			if ok != c.wantOK || len(got) != len(c.want) {
				t.Fatalf("segments = %v, %v; want %v, %v", got, ok, c.want, c.wantOK)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("segment %d = %v, want %v (all: %v)", i, got[i], c.want[i], got)
				}
			}
			if ok && len(got) != len(segmentNames) {
				t.Fatalf("%d segments for %d names", len(got), len(segmentNames))
			}
		})
	}
}
