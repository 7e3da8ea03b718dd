package persistence

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/lisabot/lisa/messages/roompb"
)

// The hand-read envelope decodes what encodeAny wrote to the same message
// anypb does, and refuses what anypb cannot resolve or parse.
func TestDecoderMatchesAnypb(t *testing.T) {
	valid := []proto.Message{
		&roompb.InvocationQueued{Candidate: &roompb.Candidate{RoomId: "!r:x", EventId: "$e", Sender: "@a:x", Body: "hi ✓"}, QueuedAtMs: 7},
		&roompb.ReplyReady{EventId: "$e", TxnId: "t", Content: []byte(`{"body":"x"}`), IsError: true},
		&roompb.InvocationDuplicate{EventId: "$d"},
		&roompb.RoomSnapshot{NextEventIndex: 9, Recent: []string{"$a", "$b"}},
		&roompb.RoomSnapshot{}, // empty value
	}
	var d decoder
	for _, m := range valid {
		b, err := encodeAny(m)
		if err != nil {
			t.Fatal(err)
		}
		for round := range 2 { // the second round takes the type from the cache
			got, err := d.decode(b)
			if err != nil {
				t.Fatalf("%T round %d: %v", m, round, err)
			}
			var a anypb.Any
			if err := proto.Unmarshal(b, &a); err != nil {
				t.Fatal(err)
			}
			want, err := a.UnmarshalNew()
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) || !proto.Equal(got, m) {
				t.Fatalf("%T round %d: decoded %v, want %v", m, round, got, want)
			}
		}
	}

	unknown, _ := proto.Marshal(&anypb.Any{TypeUrl: "type.googleapis.com/lisa.NoSuchType", Value: []byte{8, 1}})
	noURL, _ := proto.Marshal(&anypb.Any{Value: []byte{8, 1}})
	good, _ := encodeAny(&roompb.InvocationDuplicate{EventId: "$d"})
	badValue := protowire.AppendTag(nil, 1, protowire.BytesType)
	badValue = protowire.AppendString(badValue, "type.googleapis.com/lisa.room.v1.InvocationDuplicate")
	badValue = protowire.AppendTag(badValue, 2, protowire.BytesType)
	badValue = protowire.AppendBytes(badValue, []byte{0x0a, 0x7f}) // field 1 claims 127 bytes
	for _, tt := range []struct {
		name string
		b    []byte
	}{
		{"unknown type", unknown},
		{"no type URL", noURL},
		{"truncated envelope", good[:len(good)-3]},
		{"bad tag", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"corrupt value", badValue},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if m, err := d.decode(tt.b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decoded %v, %v; want ErrCorrupt", m, err)
			}
		})
	}
}
