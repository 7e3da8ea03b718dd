package matrix

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// FuzzClassify feeds raw event JSON to the classifier: it must never
// panic, and an accepted event must yield a consistent candidate.
func FuzzClassify(f *testing.F) {
	for _, seed := range []string{
		`{"event_id":"$e","sender":"@u:hs","type":"m.room.message","origin_server_ts":1,"content":{"msgtype":"m.text","body":"Lisa, hi"}}`,
		`{"event_id":"$e","sender":"@u:hs","type":"m.room.message","content":{"msgtype":"m.text","body":"x","m.mentions":{"user_ids":["@lisa:hs"]}}}`,
		`{"event_id":"$e","sender":"@u:hs","type":"m.room.message","content":{"msgtype":"m.text","body":"> <@lisa:hs> q\n\nok","m.relates_to":{"m.in_reply_to":{"event_id":"$lisa"}}}}`,
		`{"event_id":"$e","sender":"@u:hs","type":"m.room.message","content":{"msgtype":"m.text","body":"* Lisa","m.new_content":{"msgtype":"m.text","body":"Lisa"},"m.relates_to":{"rel_type":"m.replace","event_id":"$o"}}}`,
		`{"event_id":"$e","sender":"@u:hs","type":"m.room.message","content":{"msgtype":"m.text","body":["not","a","string"]}}`,
		`{"event_id":"$e","sender":"@u:hs","type":"m.room.message","content":{"msgtype":"m.text","body":"LISA\u0000\u202e"},"unsigned":{"redacted_because":{}}}`,
		`{"type":"m.reaction","content":{"m.relates_to":{"rel_type":"m.annotation","key":"Lisa"}}}`,
		`{}`, `null`, `[]`, `{"content":null}`,
		// Issue #15: reply targets that are no event IDs, or that the
		// homeserver refuses, and bodies full of near-matches of an alias.
		replySeed("not-an-id", "ok"),
		replySeed("$"+strings.Repeat("A", 300), "ok"),
		replySeed("$a\u0000b", "ok"),
		replySeed("$refused", "ok"),
		replySeed("$lisa", strings.Repeat("lisa", 1000)),
		replySeed("$other", strings.Repeat("élisa", 500)+" Lisa"),
		replySeed("", strings.Repeat("lisa_", 800)),
		replySeed("", strings.Repeat("漢", 1000)+" lisa"),
		replySeed("", "ΐlisa Ne\u0301lisa"),
	} {
		f.Add([]byte(seed))
	}
	c := NewClassifier("@lisa:hs", []string{"!r:hs"}, []string{"Lisa", "@Lisa", "ℒisa"})
	f.Fuzz(func(t *testing.T, raw []byte) {
		var evt event.Event
		if json.Unmarshal(raw, &evt) != nil {
			return
		}
		isLisa := func(_ context.Context, _, ev string) (bool, error) {
			if !validEventID(ev) {
				t.Fatalf("asked about an invalid reply target %q", ev)
			}
			if ev == "$refused" {
				return false, ErrReplyTargetRejected
			}
			return ev == "$lisa", nil
		}
		cand, verdict := c.Classify(context.Background(), id.RoomID("!r:hs"), &evt, isLisa)
		if verdict.Accepted() != (cand != nil) {
			t.Fatalf("verdict %s with candidate %v", verdict, cand)
		}
		if cand != nil && (cand.GetEventId() == "" || cand.GetSender() == "" || cand.GetSender() == "@lisa:hs" || !utf8.ValidString(cand.GetTrigger())) {
			t.Fatalf("inconsistent candidate %v", cand)
		}
	})
}

// replySeed is a text message with body, replying to target unless it is
// empty. target and body are put in the JSON as they are.
func replySeed(target, body string) string {
	rel := ""
	if target != "" {
		rel = `,"m.relates_to":{"m.in_reply_to":{"event_id":"` + target + `"}}`
	}
	return `{"event_id":"$e","sender":"@u:hs","type":"m.room.message","content":{"msgtype":"m.text","body":"` + body + `"` + rel + `}}`
}
