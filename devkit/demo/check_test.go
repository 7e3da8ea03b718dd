package demo

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
)

const (
	lisaID       = id.UserID("@lisa:localhost")
	bobID        = id.UserID("@human:localhost")
	aliceID      = id.UserID("@alice:localhost")
	genericError = "Oh dear, my thoughts got tangled. Please ask me again."
	pageURL      = "http://127.0.0.1:4000/dendrite.html?a=1&b=2"
)

// msg builds a stored m.room.message event from its raw content.
func msg(ev string, sender id.UserID, raw map[string]any) *event.Event {
	return &event.Event{ID: id.EventID(ev), Sender: sender, Type: event.EventMessage, Content: event.Content{Raw: raw}}
}

func text(body string) map[string]any { return map[string]any{"msgtype": "m.text", "body": body} }

func replyTo(target string, raw map[string]any) map[string]any {
	raw["m.relates_to"] = map[string]any{"m.in_reply_to": map[string]any{"event_id": target}}
	return raw
}

func mentioning(user id.UserID, raw map[string]any) map[string]any {
	raw["m.mentions"] = map[string]any{"user_ids": []any{string(user)}}
	return raw
}

// researched is a research answer as Lisa's renderer formats it, citing
// link.
func researched(link string) map[string]any {
	raw := text("I looked it up.\n\nSources:\n1. Dendrite — " + link)
	raw["format"] = "org.matrix.custom.html"
	raw["formatted_body"] = `<p>I looked it up.</p><p><strong>Sources</strong></p><ol><li><a href="` +
		strings.ReplaceAll(link, "&", "&amp;") + `">Dendrite</a></li></ol>`
	return raw
}

// goodRun is a room where the showcase worked.
func goodRun() checkInput {
	return checkInput{
		lisa: lisaID,
		events: []*event.Event{
			msg("$greet", bobID, text("Morning! Are we still on?")),
			msg("$plan", aliceID, text("I'll set it up on the old NUC.")),
			msg("$q1", bobID, mentioning(lisaID, text("Lisa, who offered?"))),
			msg("$a1", lisaID, replyTo("$q1", text("That was Alice."))),
			msg("$q2", bobID, mentioning(lisaID, text("Lisa, can you look up Dendrite?"))),
			msg("$a2", lisaID, replyTo("$q2", researched(pageURL))),
			msg("$q3", bobID, replyTo("$a2", text("Do we need PostgreSQL?"))),
			msg("$a3", lisaID, replyTo("$q3", text("SQLite is enough."))),
		},
		played:     played{chatter: []id.EventID{"$greet", "$plan"}, roomQuestion: "$q1", research: "$q2", followUp: "$q3"},
		errorTexts: []string{genericError, "Too much at once."},
		fetched:    []string{pageURL},
		logs: []string{
			logLine("INFO", "invocation transition", "$q2", ""),
			logLine("INFO", "invocation attempt finished", "$q2", "ok"),
		},
	}
}

// logLine is one of Lisa's JSON log lines about event ev.
func logLine(level, msg, ev, code string) string {
	line := fmt.Sprintf(`{"time":"2026-01-01T00:00:00Z","level":%q,"msg":%q,"event":%q`, level, msg, messages.Hash(ev))
	if code != "" {
		line += fmt.Sprintf(`,"code":%q`, code)
	}
	return line + "}"
}

// replace returns in with the event ev's content replaced by raw.
func replace(in checkInput, ev string, raw map[string]any) checkInput {
	for i, e := range in.events {
		if string(e.ID) == ev {
			in.events[i] = msg(ev, e.Sender, raw)
		}
	}
	return in
}

func TestSelfCheck(t *testing.T) {
	failedTool := logLine("WARN", "tool call failed", "$q2", "conversion_failed")
	cases := []struct {
		name   string
		in     func() checkInput
		failed map[string]string // check name → substring of its problem
		log    map[string]string // check name → its explaining log line
	}{
		{name: "the showcase worked", in: goodRun},
		{
			name: "the research answer is the persona's error",
			in: func() checkInput {
				in := replace(goodRun(), "$a2", replyTo("$q2", text(genericError)))
				in.logs = append(in.logs, logLine("INFO", "invocation transition", "$q1", ""), failedTool)
				return in
			},
			failed: map[string]string{CheckNoError: `the answer to "Lisa, can you look up Dendrite?" is the persona's error`,
				CheckSources: "has no Sources list"},
			log: map[string]string{CheckNoError: failedTool, CheckSources: failedTool},
		},
		{
			name: "a question answered twice",
			in: func() checkInput {
				in := goodRun()
				in.events = append(in.events, msg("$a1bis", lisaID, replyTo("$q1", text("Alice again."))))
				return in
			},
			failed: map[string]string{CheckOneAnswer: `2 answers to "Lisa, who offered?"`},
			log:    map[string]string{CheckOneAnswer: noExplainingLine + " (event " + messages.Hash("$q1") + ")"},
		},
		{
			name: "chatter answered",
			in: func() checkInput {
				in := goodRun()
				in.events = append(in.events, msg("$a0", lisaID, replyTo("$plan", text("Nice!"))))
				return in
			},
			failed: map[string]string{CheckNoChatter: `1 answers to "I'll set it up on the old NUC.", which addresses nobody`},
		},
		{
			name: "a source Lisa never fetched",
			in: func() checkInput {
				return replace(goodRun(), "$a2", replyTo("$q2", researched("https://example.org/made-up")))
			},
			failed: map[string]string{CheckSources: "source https://example.org/made-up was not fetched in this run"},
			log:    map[string]string{CheckSources: logLine("INFO", "invocation attempt finished", "$q2", "ok")},
		},
		{
			name: "sources without links",
			in: func() checkInput {
				raw := researched(pageURL)
				raw["formatted_body"] = "<p><strong>Sources</strong></p><ol></ol>"
				return replace(goodRun(), "$a2", replyTo("$q2", raw))
			},
			failed: map[string]string{CheckSources: "links nothing"},
		},
		{
			name: "a source missing from the plain body",
			in: func() checkInput {
				raw := researched(pageURL)
				raw["body"] = "I looked it up."
				return replace(goodRun(), "$a2", replyTo("$q2", raw))
			},
			failed: map[string]string{CheckSources: "plain body of the research answer does not list source " + pageURL},
		},
		{
			name: "the follow-up unanswered",
			in: func() checkInput {
				in := goodRun()
				in.events = in.events[:len(in.events)-1]
				in.logs = append(in.logs, logLine("INFO", "invocation transition", "$q3", ""), logLine("INFO", "invocation attempt finished", "$q3", "llm_rejected"))
				return in
			},
			failed: map[string]string{CheckOneAnswer: `0 answers to "Do we need PostgreSQL?"`, CheckFollowUp: `no answer to "Do we need PostgreSQL?"`},
			log:    map[string]string{CheckFollowUp: logLine("INFO", "invocation attempt finished", "$q3", "llm_rejected")},
		},
		{
			name: "the follow-up mentions Lisa",
			in: func() checkInput {
				return replace(goodRun(), "$q3", mentioning(lisaID, replyTo("$a2", text("Do we need PostgreSQL?"))))
			},
			failed: map[string]string{CheckFollowUp: "mentions Lisa"},
		},
		{
			name:   "the follow-up replies to Bob",
			in:     func() checkInput { return replace(goodRun(), "$q3", replyTo("$q2", text("Do we need PostgreSQL?"))) },
			failed: map[string]string{CheckFollowUp: "not a reply to Lisa's research answer"},
		},
		{
			name: "the conversation stopped after the research question",
			in: func() checkInput {
				in := goodRun()
				in.events = in.events[:5]
				in.played.followUp = ""
				return in
			},
			failed: map[string]string{CheckOneAnswer: `0 answers to "Lisa, can you look up Dendrite?"`,
				CheckSources: "got no answer", CheckFollowUp: "never asked"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checks := selfCheck(c.in())
			if len(checks) != 5 {
				t.Fatalf("%d checks, want 5", len(checks))
			}
			for _, got := range checks {
				want, shouldFail := c.failed[got.Name]
				switch {
				case shouldFail && !strings.Contains(got.Problem, want):
					t.Errorf("%s: problem %q, want one containing %q", got.Name, got.Problem, want)
				case !shouldFail && !got.Passed():
					t.Errorf("%s failed: %s", got.Name, got.Problem)
				}
				if wantLog, ok := c.log[got.Name]; ok && got.Log != wantLog {
					t.Errorf("%s: explaining line\n%s\nwant\n%s", got.Name, got.Log, wantLog)
				}
			}
		})
	}
}

func TestExplainingLine(t *testing.T) {
	other := logLine("ERROR", "reply abandoned", "$other", "matrix_forbidden")
	queued := logLine("INFO", "invocation transition", "$q", "")
	finished := logLine("INFO", "invocation attempt finished", "$q", "ok")
	failed := logLine("INFO", "invocation attempt finished", "$q", "llm_rejected")
	warn := logLine("WARN", "tool call failed", "$q", "fetch_failed")
	cases := []struct {
		name string
		logs []string
		want string
	}{
		{"a warning wins", []string{other, queued, failed, warn, finished}, warn},
		{"then a failure code", []string{queued, failed, finished}, failed},
		{"then the last line", []string{queued, finished, other}, finished},
		{"skips what is not JSON", []string{"not json", queued}, queued},
		{"none", []string{other}, noExplainingLine + " (event " + messages.Hash("$q") + ")"},
	}
	for _, c := range cases {
		if got := explainingLine(c.logs, "$q"); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestPrintChecks(t *testing.T) {
	var out bytes.Buffer
	failed := printChecks(&out, []Check{{Name: CheckOneAnswer}, {Name: CheckNoError, Problem: "the answer to \"x\" is the persona's error", Log: `{"level":"WARN"}`}})
	want := `
--- self-check (from the events the homeserver stores) ---
ok      every question got exactly one answer
FAILED  no answer is the persona's error: the answer to "x" is the persona's error
        log: {"level":"WARN"}
--- 1 of 2 checks failed ---
`
	if out.String() != want || len(failed) != 1 || failed[0].Name != CheckNoError {
		t.Fatalf("printed\n%s\nwant\n%s(failed %v)", out.String(), want, failed)
	}
	out.Reset()
	if failed := printChecks(&out, []Check{{Name: CheckOneAnswer}}); len(failed) != 0 || !strings.HasSuffix(out.String(), "--- all 1 checks passed ---\n") {
		t.Fatalf("printed\n%s", out.String())
	}
	err := &CheckError{Failed: []Check{{Name: CheckNoError}, {Name: CheckSources}}}
	if got := err.Error(); got != "the showcase failed 2 check(s): "+CheckNoError+"; "+CheckSources {
		t.Fatalf("error %q", got)
	}
}
