package roomctx

import (
	"strings"
	"testing"
)

func TestTextMemo(t *testing.T) {
	const budget = 200 // 100 bytes per generation
	m := newTextMemo(budget)
	size := func() int {
		n := 0
		for _, g := range []map[string]string{m.cur, m.prev} {
			for k, v := range g {
				n += len(k) + len(v)
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
			if n := size(); n > budget {
				t.Fatalf("memo holds %d bytes, budget %d", n, budget)
			}
		}
	}
	if _, ok := m.cur[srcs[len(srcs)-1]]; !ok {
		t.Fatal("the latest conversion is not remembered")
	}

	// A hit in the previous generation moves the entry forward, so it
	// survives the next rotation.
	m = newTextMemo(budget)
	m.htmlToText("<b>keep</b>")
	m.htmlToText(strings.Repeat("x", 45)) // 90 bytes: the generation overflows, rotation
	if _, ok := m.prev["<b>keep</b>"]; !ok {
		t.Fatalf("rotation did not keep the older entry as previous: %v / %v", m.cur, m.prev)
	}
	m.htmlToText("<b>keep</b>")
	if _, ok := m.cur["<b>keep</b>"]; !ok {
		t.Fatal("a hit in the previous generation was not moved forward")
	}

	// An input larger than half the budget is converted, not kept.
	big := "<p>" + strings.Repeat("y", budget) + "</p>"
	if got := m.htmlToText(big); got != htmlToText(big) {
		t.Fatalf("big input converted to %q", got)
	}
	if _, ok := m.cur[big]; ok {
		t.Fatal("an input over half the budget was kept")
	}

	// A nil memo converts without remembering.
	var none *textMemo
	if got := none.htmlToText("<b>x</b>"); got != "**x**" {
		t.Fatalf("nil memo: %q", got)
	}
}
