package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// pb builds a protobuf message field by field.
type pb []byte

func (b pb) varint(num protowire.Number, v uint64) pb {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func (b pb) bytes(num protowire.Number, v []byte) pb {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func (b pb) packed(num protowire.Number, vs ...uint64) pb {
	var p []byte
	for _, v := range vs {
		p = protowire.AppendVarint(p, v)
	}
	return b.bytes(num, p)
}

// testProfile is a CPU profile as runtime/pprof writes it: sample types
// (samples/count, cpu/nanoseconds), packed sample fields, and a location
// with an inlined call. Stacks (leaf first) and CPU values:
//
//	leaf, mid (inlined into) outer   30
//	other, outer                     10
func testProfile(t *testing.T) []byte {
	strs := []string{"", "samples", "count", "cpu", "nanoseconds", "leaf", "mid", "outer", "other"}
	var p pb
	p = p.bytes(1, pb{}.varint(1, 1).varint(2, 2))
	p = p.bytes(1, pb{}.varint(1, 3).varint(2, 4))
	p = p.bytes(2, pb{}.packed(1, 1, 2).packed(2, 3, 30))
	p = p.bytes(2, pb{}.packed(1, 3, 2).packed(2, 1, 10))
	line := func(fn uint64) []byte { return pb{}.varint(1, fn).varint(2, 7) }
	p = p.bytes(4, pb{}.varint(1, 1).bytes(4, line(1)).bytes(4, line(2)))
	p = p.bytes(4, pb{}.varint(1, 2).bytes(4, line(3)))
	p = p.bytes(4, pb{}.varint(1, 3).bytes(4, line(4)))
	for id, name := range []uint64{5, 6, 7, 8} {
		p = p.bytes(5, pb{}.varint(1, uint64(id+1)).varint(2, name))
	}
	for _, s := range strs {
		p = p.bytes(6, []byte(s))
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(p); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestProfileTop: flat shares go to the leaf function, cumulative shares
// count a function once per sample, inlined frames included, by CPU time.
func TestProfileTop(t *testing.T) {
	top, err := profileTop(testProfile(t), 3)
	if err != nil {
		t.Fatal(err)
	}
	wantFlat := []funcShare{{"leaf", 75}, {"other", 25}}
	wantCum := []funcShare{{"outer", 100}, {"leaf", 75}, {"mid", 75}}
	if top.Samples != 4 || !equalShares(top.Flat, wantFlat) || !equalShares(top.Cum, wantCum) {
		t.Errorf("profileTop = %+v; want flat %v, cumulative %v", top, wantFlat, wantCum)
	}
	if _, err := profileTop([]byte("not a profile"), 3); err == nil {
		t.Error("a non-profile was read")
	}
}

func equalShares(a, b []funcShare) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFakesProcessStops: the fakes child serves its rooms and exits when
// the bench closes it.
func TestFakesProcessStops(t *testing.T) {
	ctx := context.Background()
	p, err := startFakesProcess(ctx, 2, "t")
	if err != nil {
		t.Fatal(err)
	}
	rooms := p.roomIDs()
	counts, err := p.counts(ctx)
	if len(rooms) != 2 || err != nil || counts == nil {
		t.Errorf("rooms %v, counts %v, %v", rooms, counts, err)
	}
	if _, isolated, err := p.cpu(ctx); !isolated || err != nil {
		t.Errorf("cpu: isolated %v, %v", isolated, err)
	}
	p.Close()
	if st := p.cmd.ProcessState; st == nil || !st.Exited() || st.ExitCode() != exitOK {
		t.Errorf("after Close the child is %v", st)
	}
}
