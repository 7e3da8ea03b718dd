package main

import (
	"testing"
	"time"
)

// TestSegments: the path is split at the first /sync, the first of the two
// requests Lisa sends side by side, the last typing request before the
// send, and the send; a missing request drops the sample.
func TestSegments(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ms := time.Millisecond
	cases := []struct {
		name   string
		pts    []tracePoint
		want   []time.Duration
		wantOK bool
	}{
		{"context first", []tracePoint{{"sync", at(1)}, {"typing", at(2)}, {"context", at(3)}, {"joined_members", at(4)}, {"typing", at(9)}, {"send", at(10)}, {"typing", at(11)}},
			[]time.Duration{1 * ms, 2 * ms, 6 * ms, 1 * ms}, true},
		{"members first", []tracePoint{{"sync", at(1)}, {"joined_members", at(3)}, {"context", at(4)}, {"typing", at(9)}, {"send", at(10)}},
			[]time.Duration{1 * ms, 2 * ms, 6 * ms, 1 * ms}, true},
		{"earlier points ignored", []tracePoint{{"sync", at(-5)}, {"sync", at(1)}, {"context", at(3)}, {"joined_members", at(3)}, {"typing", at(9)}, {"send", at(10)}},
			[]time.Duration{1 * ms, 2 * ms, 6 * ms, 1 * ms}, true},
		{"no members", []tracePoint{{"sync", at(1)}, {"context", at(3)}, {"typing", at(9)}, {"send", at(10)}}, nil, false},
		{"no send", []tracePoint{{"sync", at(1)}, {"context", at(3)}, {"joined_members", at(3)}, {"typing", at(9)}}, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := segments(t0, c.pts)
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
