package roomctx

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"maunium.net/go/mautrix/event"
)

func TestMemoHTML(t *testing.T) {
	const budget = 200 // 100 bytes per generation
	m := newMemos(budget)
	held := func() int {
		n := 0
		for _, g := range []map[string]entry[string]{m.html.cur, m.html.prev} {
			for k, e := range g {
				if e.size != len(k)+len(e.v) {
					t.Fatalf("entry %q counted as %d bytes", k, e.size)
				}
				n += e.size
			}
		}
		return n
	}
	srcs := []string{"<b>one</b>", "<i>two</i>", "<p>three</p>", "<code>four</code>", "<em>five</em>", "<s>six</s>", "<u>seven</u>"}
	for round := 0; round < 3; round++ {
		for _, src := range srcs {
			if got, want := m.htmlToText(src), htmlToText(src); got != want {
				t.Fatalf("round %d: memo gave %q for %q, conversion %q", round, got, src, want)
			}
			if n := held(); n > budget {
				t.Fatalf("memo holds %d bytes, budget %d", n, budget)
			}
		}
	}
	if _, ok := m.html.cur[srcs[len(srcs)-1]]; !ok {
		t.Fatal("the latest conversion is not remembered")
	}

	// A hit in the previous generation moves the entry forward, so it
	// survives the next rotation.
	m = newMemos(budget)
	m.htmlToText("<b>keep</b>")
	m.htmlToText(strings.Repeat("x", 45)) // 90 bytes: the generation overflows, rotation
	if _, ok := m.html.prev["<b>keep</b>"]; !ok {
		t.Fatalf("rotation did not keep the older entry as previous: %v / %v", m.html.cur, m.html.prev)
	}
	m.htmlToText("<b>keep</b>")
	if e, ok := m.html.cur["<b>keep</b>"]; !ok || e.size != 19 {
		t.Fatalf("a hit in the previous generation was not moved forward with its size: %+v %v", e, ok)
	}

	// An input larger than half the budget is converted, not kept.
	big := "<p>" + strings.Repeat("y", budget) + "</p>"
	if got := m.htmlToText(big); got != htmlToText(big) {
		t.Fatalf("big input converted to %q", got)
	}
	if _, ok := m.html.cur[big]; ok {
		t.Fatal("an input over half the budget was kept")
	}

	// Nil memos convert without remembering.
	var none *memos
	if got := none.htmlToText("<b>x</b>"); got != "**x**" {
		t.Fatalf("nil memos: %q", got)
	}
}

func TestMemoContent(t *testing.T) {
	m := newMemos(1 << 16)
	for _, raw := range []string{
		`{"msgtype":"m.text","body":"hi","m.relates_to":{"m.in_reply_to":{"event_id":"$x"}}}`,
		`{"msgtype":"m.text","body":"* hi","m.new_content":{"msgtype":"m.text","body":"hi"},"m.relates_to":{"rel_type":"m.replace","event_id":"$x"}}`,
		`{}`,
	} {
		var want event.MessageEventContent
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		first, ok1 := m.decodeContent([]byte(raw))
		again, ok2 := m.decodeContent([]byte(raw))
		if !ok1 || !ok2 || !reflect.DeepEqual(*first, want) || first != again {
			t.Fatalf("%s: decoded %+v then %p (first %p), want %+v", raw, first, again, first, want)
		}
	}
	// A content that does not decode is reported, not remembered.
	for range 2 {
		if msg, ok := m.decodeContent([]byte(`{"body":5}`)); ok || msg != nil {
			t.Fatalf("bad content decoded: %+v", msg)
		}
	}
	if _, ok := m.content.cur[`{"body":5}`]; ok {
		t.Fatal("a failed decoding was remembered")
	}
}
