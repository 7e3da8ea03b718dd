package matrix

import (
	"fmt"
	"strings"
	"testing"
)

// contextBody is a GET /context response like a lived-in room's: the
// anchor and 40 events before it, half of them questions, half Lisa's
// formatted answers.
func contextBody() []byte {
	var evs []string
	for i := 40; i > 0; i-- {
		if i%2 == 0 {
			evs = append(evs, fmt.Sprintf(`{"type":"m.room.message","sender":"@lisa:hs","event_id":"$r%d","room_id":"!r:hs","origin_server_ts":%d,`+
				`"content":{"msgtype":"m.text","body":"> <@ann:hs> Lisa, ping %d\n\nPong. This is the benchmark's scripted answer.","format":"org.matrix.custom.html",`+
				`"formatted_body":"<mx-reply><blockquote>In reply to @ann:hs<br>Lisa, ping %d</blockquote></mx-reply><p>Pong. This is the benchmark&#39;s <strong>scripted</strong> answer.</p>",`+
				`"m.relates_to":{"m.in_reply_to":{"event_id":"$q%d"}},"m.mentions":{"user_ids":["@ann:hs"]},"org.lisabot.invocation":"$q%d"},"unsigned":{"age":%d}}`,
				i, 1700000000000+i, i, i, i, i, 1000+i))
			continue
		}
		evs = append(evs, fmt.Sprintf(`{"type":"m.room.message","sender":"@ann:hs","event_id":"$q%d","room_id":"!r:hs","origin_server_ts":%d,`+
			`"content":{"msgtype":"m.text","body":"Lisa, ping %d","m.mentions":{"user_ids":["@lisa:hs"]}},"unsigned":{"age":%d}}`, i, 1700000000000+i, i, 1000+i))
	}
	return []byte(`{"start":"t1","end":"t2","event":` + evs[0] + `,"events_before":[` + strings.Join(evs[1:], ",") + `],"events_after":[],"state":[]}`)
}

// BenchmarkParseContext decodes a lived-in room's GET /context response.
func BenchmarkParseContext(b *testing.B) {
	body := contextBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		resp, err := parseContext(body)
		if err != nil || len(resp.EventsBefore) != 39 {
			b.Fatalf("%v, %d events", err, len(resp.EventsBefore))
		}
	}
}
