package demo

import (
	"reflect"
	"strings"
	"testing"

	"github.com/lisabot/lisa/devkit/llmscript"
)

func TestInvocationText(t *testing.T) {
	cases := []struct{ in, want string }{
		{`<room_context room_id="!r"><message sequence="1" invocation="true">
Lisa, is 1 &lt; 2 &amp;&amp; "x"?
</message></room_context>`, `Lisa, is 1 < 2 && "x"?`},
		{`<room_context></room_context>`, ""},
		{`<message invocation="true">
and then?
<reply_to sequence="3" />
</message>`, "and then?"},
	}
	for _, c := range cases {
		if got := InvocationText(c.in); got != c.want {
			t.Errorf("InvocationText = %q, want %q", got, c.want)
		}
	}
}

// demoBlock is a context block as roomctx renders it.
const demoBlock = `<room_context room_id="!r:x">
<message sequence="1" event_id="$1" author_id="@alice:x" author_name="Alice" timestamp="2026-01-01T00:00:00Z">
I&#39;ll set up the homeserver on the old NUC &amp; back it up.
</message>
<message sequence="2" event_id="$2" author_id="@carol:x" author_name="Carol">
Lunch at noon?
</message>
<message sequence="3" event_id="$3" author_id="@bob:x" author_name="Bob" invocation="true">
Lisa, who sets up the homeserver?
</message>
</room_context>`

func TestDemoModelNamesEarlierSpeaker(t *testing.T) {
	got := decide(llmscript.Request{Messages: []llmscript.Message{{Role: "user", Content: demoBlock}}}).answer
	if !strings.Contains(got, "Alice") || !strings.Contains(got, "@alice:x") || !strings.Contains(got, "old NUC & back it up") {
		t.Fatalf("answer %q", got)
	}
}

func TestDemoModelFollowUpFromRepliedAnswer(t *testing.T) {
	block := `<room_context room_id="!r">
<message sequence="1" author_id="@lisa:x" author_name="Lisa" assistant="true">
- Dendrite is written in Go.
- SQLite suits a small team. PostgreSQL scales further.
</message>
<message sequence="2" author_id="@bob:x" author_name="Bob" invocation="true">
Is SQLite fine for a small team?
<reply_to sequence="1" />
</message>
</room_context>`
	got := decide(llmscript.Request{Messages: []llmscript.Message{{Role: "user", Content: block}}}).answer
	if !strings.Contains(got, "SQLite suits a small team.") {
		t.Fatalf("answer %q", got)
	}
}

// TestDemoModelFollowUpByEventID: roomctx names reply targets by event ID.
func TestDemoModelFollowUpByEventID(t *testing.T) {
	block := `<room_context room_id="!r">
<message event_id="$a" author_id="@lisa:x" author_name="Lisa" assistant="true">
- SQLite suits a small team. PostgreSQL scales further.
</message>
<message event_id="$q" author_id="@bob:x" author_name="Bob" invocation="true">
Is SQLite fine for a small team?
<reply_to event_id="$a" />
</message>
</room_context>`
	got := decide(llmscript.Request{Messages: []llmscript.Message{{Role: "user", Content: block}}}).answer
	if !strings.Contains(got, "SQLite suits a small team.") {
		t.Fatalf("answer %q", got)
	}
}

func TestDemoModelResearchSteps(t *testing.T) {
	block := `<message sequence="1" author_id="@bob:x" invocation="true">
Lisa, can you look up Dendrite?
</message>`
	req := llmscript.Request{Messages: []llmscript.Message{{Role: "user", Content: block}}}
	results := []string{
		`{"ok":true,"content":"1. D\n   http://h/d","source_urls":["http://h/d"]}`,
		`{"ok":true,"content":"{\"artifact_id\":\"art_1\",\"final_url\":\"http://h/d\",\"title\":\"D page\"}","source_urls":["http://h/d"]}`,
		`{"ok":true,"content":"# D\n\nDendrite is a Matrix homeserver written in Go, and this paragraph is long enough.","source_urls":["http://h/d"]}`,
	}
	want := []demoMove{callMove("web_search", "query", "can you look up Dendrite?"), callMove("fetch_web_page", "url", "http://h/d"),
		callMove("html_to_markdown", "artifact_id", "art_1"),
		answerMove("I looked it up. According to *D page*:\n\n- Dendrite is a Matrix homeserver written in Go, and this paragraph is long enough.", "http://h/d")}
	for i, w := range want {
		if i > 0 {
			req.Messages = append(req.Messages, llmscript.Message{Role: "tool", Content: results[i-1]})
		}
		if got := decide(req); !reflect.DeepEqual(got, w) {
			t.Fatalf("step %d: %#v, want %#v", i, got, w)
		}
	}
	req.Messages[len(req.Messages)-1].Content = `{"ok":false,"code":"fetch_failed","message":"The page could not be fetched."}`
	if got := decide(req); got.tool != "" || len(got.sources) != 0 || !strings.Contains(got.answer, "could not be fetched") {
		t.Fatalf("failed step: %#v", got)
	}
}

func TestSentencesKeepsEmphasis(t *testing.T) {
	got := sentences("- **Dendrite** is a server. It is written in Go.\n> quoted line")
	want := []string{"**Dendrite** is a server.", "It is written in Go.", "quoted line"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sentences = %q, want %q", got, want)
	}
}
