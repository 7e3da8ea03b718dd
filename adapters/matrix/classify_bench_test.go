package matrix

import (
	"context"
	"encoding/json"
	"testing"

	"maunium.net/go/mautrix/event"
)

func benchEvent(b *testing.B, content map[string]any) *event.Event {
	b.Helper()
	raw, err := json.Marshal(map[string]any{
		"event_id": "$e", "sender": "@ann:hs", "type": "m.room.message", "origin_server_ts": 1700000000000,
		"room_id": string(testRoom), "content": content,
	})
	if err != nil {
		b.Fatal(err)
	}
	var evt event.Event
	if err := json.Unmarshal(raw, &evt); err != nil {
		b.Fatal(err)
	}
	return &evt
}

// BenchmarkClassify measures classification of the three common cases:
// a message that is not for Lisa, a mention by m.mentions and a mention
// by alias in the body.
func BenchmarkClassify(b *testing.B) {
	c := NewClassifier(testBot, []string{string(testRoom)}, []string{"Lisa", "@Lisa"})
	notLisa := func(context.Context, string, string) (bool, error) { return false, nil }
	cases := []struct {
		name    string
		content map[string]any
	}{
		{"ignored", text("Good morning everyone, the meeting moved to three o'clock.")},
		{"mentions", map[string]any{"msgtype": "m.text", "body": "what is the weather like?",
			"m.mentions": map[string]any{"user_ids": []string{testBot}}}},
		{"alias", text("Hey Lisa, could you summarise the thread above for me?")},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			evt := benchEvent(b, tc.content)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				c.Classify(ctx, testRoom, evt, notLisa)
			}
		})
	}
}

// BenchmarkClassifyWorstCase measures bodies of 60 KB that defeat a naive
// alias scan: thousands of occurrences of an alias, none a whole word,
// and a long multibyte text before a real mention.
func BenchmarkClassifyWorstCase(b *testing.B) {
	const size = 60 << 10
	c := NewClassifier(testBot, []string{string(testRoom)}, []string{"Lisa", "@Lisa"})
	notLisa := func(context.Context, string, string) (bool, error) { return false, nil }
	for _, tc := range []struct{ name, body string }{
		{"lisa_repeated", repeatTo("lisa", size)},
		{"elisa_repeated", repeatTo("élisa", size)},
		{"multibyte_then_alias", repeatTo("漢", size) + " lisa"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			evt := benchEvent(b, text(tc.body))
			ctx := context.Background()
			b.SetBytes(int64(len(tc.body)))
			b.ReportAllocs()
			for b.Loop() {
				c.Classify(ctx, testRoom, evt, notLisa)
			}
		})
	}
}
