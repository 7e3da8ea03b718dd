package persistence

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/messages/roompb"
)

// FuzzDecodeAny: the persisted-event codec never panics on corrupt bytes,
// and what it encodes it decodes to an equal message.
func FuzzDecodeAny(f *testing.F) {
	for _, m := range []proto.Message{
		&roompb.InvocationQueued{Candidate: &roompb.Candidate{RoomId: "!r", EventId: "$e", Body: "hi"}},
		&roompb.ReplyReady{EventId: "$e", TxnId: "t", Content: []byte(`{"body":"x"}`)},
		&roompb.RoomSnapshot{NextEventIndex: 9, Recent: []string{"$a"}},
	} {
		b, err := encodeAny(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xff, 0x00, 0x01})
	var d decoder
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := d.decode(b)
		if err != nil {
			return
		}
		again, err := encodeAny(m)
		if err != nil {
			t.Fatalf("decoded %T cannot be encoded: %v", m, err)
		}
		m2, err := d.decode(again)
		if err != nil || !proto.Equal(m, m2) {
			t.Fatalf("round trip changed %v", m)
		}
	})
}
