package roomctx

import (
	"context"
	"fmt"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
)

// BenchmarkBuild measures context assembly around an invocation with 40
// earlier messages (plain, HTML, replies and an edit), as GET /context
// returns them, with default-like limits.
func BenchmarkBuild(b *testing.B) {
	var hist []*event.Event
	for i := 1; i <= 40; i++ {
		sender := "@alice:hs"
		if i%3 == 0 {
			sender = "@bob:hs"
		}
		content := txt(fmt.Sprintf("message %d with a few words of ordinary chat in it", i))
		switch i % 10 {
		case 4:
			content = `{"msgtype":"m.text","body":"**bold** text","format":"org.matrix.custom.html","formatted_body":"<p><b>bold</b> text with <a href=\"https://example.org\">a link</a></p>"}`
		case 7:
			content = replyTxt("answering that", fmt.Sprintf("$e%d", i-2))
		case 9:
			content = editTxt("edited message", fmt.Sprintf("$e%d", i-1))
		}
		hist = append(hist, ev(b, i, sender, content))
	}
	invEv := ev(b, 100, "@bob:hs", txt("Lisa, what did we decide?"), set("event_id", "$inv"))
	f := &fakeFetcher{resp: &mautrix.RespContext{Event: invEv, EventsBefore: before(hist...)}, members: people()}
	builder := New(f, testBot, Limits{MaxEvents: 30, MaxCharacters: 12000, MaxEventCharacters: 2000, MaxReplyDepth: 2})
	c := invocation("Lisa, what did we decide?", "")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := builder.Build(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}
