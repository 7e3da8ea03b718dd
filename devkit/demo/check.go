package demo

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"slices"
	"strings"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
)

// The self-check's names, in the order it runs them.
const (
	CheckOneAnswer   = "every question got exactly one answer"
	CheckNoChatter   = "nothing that did not address Lisa was answered"
	CheckNoError     = "no answer is the persona's error"
	CheckSources     = "the research answer lists Sources that Lisa fetched in this run"
	CheckFollowUp    = "the follow-up without a mention was answered"
	maxQuoteRunes    = 60
	sourcesHeading   = "<strong>Sources</strong>"
	noExplainingLine = "no log line of Lisa's names this message"
)

// Check is the outcome of one self-check.
type Check struct {
	// Name says what was checked (one of the Check* constants).
	Name string
	// Problem says what is wrong; empty when the check passed.
	Problem string
	// Log is the log line of Lisa's that explains a failure best (empty
	// when it passed, or when no line names the message at fault).
	Log string
}

// Passed reports whether the check passed.
func (c Check) Passed() bool { return c.Problem == "" }

// CheckError is [Run]'s error when the showcase failed its self-check.
type CheckError struct {
	// Failed lists the checks that failed, in order.
	Failed []Check
}

func (e *CheckError) Error() string {
	names := make([]string, len(e.Failed))
	for i, c := range e.Failed {
		names[i] = c.Name
	}
	return fmt.Sprintf("the showcase failed %d check(s): %s", len(e.Failed), strings.Join(names, "; "))
}

// checkInput is what the self-check reads: the room as the homeserver
// stores it, what the conversation sent, and what Lisa and the local web
// site did in this run.
type checkInput struct {
	lisa       id.UserID
	events     []*event.Event // the room's messages, oldest first
	played     played
	errorTexts []string // the persona's generic and overload errors
	fetched    []string // URLs the local web site served in this run
	logs       []string // Lisa's JSON log lines, oldest first
}

// selfCheck verifies what the demo showed, from the stored events. It is
// pure: every check runs and reports, whatever the others found.
func selfCheck(in checkInput) []Check {
	replies := map[id.EventID][]*event.Event{} // question → Lisa's replies
	for _, evt := range in.events {
		if evt.Sender == in.lisa {
			if target := replyTarget(evt); target != "" {
				replies[target] = append(replies[target], evt)
			}
		}
	}
	questions := []id.EventID{in.played.roomQuestion, in.played.research, in.played.followUp}
	explain := func(ev id.EventID) string { return explainingLine(in.logs, ev) }
	var out []Check

	one := Check{Name: CheckOneAnswer}
	for _, q := range questions {
		if q == "" {
			one.Problem = "the conversation stopped before every question was asked (an earlier one got no answer)"
			break
		}
		if n := len(replies[q]); n != 1 {
			one.Problem, one.Log = fmt.Sprintf("%d answers to %s", n, quote(in.events, q)), explain(q)
			break
		}
	}
	out = append(out, one)

	chatter := Check{Name: CheckNoChatter}
	for _, c := range in.played.chatter {
		if n := len(replies[c]); n > 0 {
			chatter.Problem, chatter.Log = fmt.Sprintf("%d answers to %s, which addresses nobody", n, quote(in.events, c)), explain(c)
			break
		}
	}
	out = append(out, chatter)

	noErr := Check{Name: CheckNoError}
	for _, q := range questions {
		for _, r := range replies[q] {
			if isPersonaError(plainBody(r), in.errorTexts) {
				noErr.Problem, noErr.Log = fmt.Sprintf("the answer to %s is the persona's error", quote(in.events, q)), explain(q)
				break
			}
		}
		if noErr.Problem != "" {
			break
		}
	}
	out = append(out, noErr)

	out = append(out, checkSources(in, replies[in.played.research], explain))

	follow := Check{Name: CheckFollowUp}
	switch f := findEvent(in.events, in.played.followUp); {
	case f == nil:
		follow.Problem = "the follow-up was never asked (an earlier question got no answer)"
	case mentions(f, in.lisa):
		follow.Problem = "the follow-up mentions Lisa, so it proves nothing about replies without a mention"
	case !sentBy(findEvent(in.events, replyTarget(f)), in.lisa):
		follow.Problem = "the follow-up is not a reply to Lisa's research answer"
	case len(replies[f.ID]) == 0:
		follow.Problem, follow.Log = fmt.Sprintf("no answer to %s", quote(in.events, f.ID)), explain(f.ID)
	}
	out = append(out, follow)
	return out
}

// checkSources: the research answer has a Sources list, every link of it
// was served by the local web site in this run, and the plain body lists
// it too.
func checkSources(in checkInput, answers []*event.Event, explain func(id.EventID) string) Check {
	c := Check{Name: CheckSources}
	fail := func(format string, args ...any) Check {
		c.Problem, c.Log = fmt.Sprintf(format, args...), explain(in.played.research)
		return c
	}
	if len(answers) == 0 {
		return fail("the research question got no answer")
	}
	answer := answers[0]
	formatted, _ := answer.Content.Raw["formatted_body"].(string)
	i := strings.LastIndex(formatted, sourcesHeading)
	if i < 0 {
		return fail("the research answer has no Sources list")
	}
	links := hrefs(formatted[i:])
	if len(links) == 0 {
		return fail("the research answer's Sources list links nothing")
	}
	body := plainBody(answer)
	for _, l := range links {
		if !slices.Contains(in.fetched, l) {
			return fail("source %s was not fetched in this run (the local web site served %d page(s))", l, len(in.fetched))
		}
		if !strings.Contains(body, l) {
			return fail("the plain body of the research answer does not list source %s", l)
		}
	}
	return c
}

// hrefs returns the targets of the links in an HTML fragment, unescaped.
func hrefs(fragment string) []string {
	var out []string
	for _, part := range strings.Split(fragment, `href="`)[1:] {
		link, _, _ := strings.Cut(part, `"`)
		out = append(out, html.UnescapeString(link))
	}
	return out
}

// isPersonaError reports whether an answer is one of the persona's error
// messages.
func isPersonaError(body string, errorTexts []string) bool {
	for _, e := range errorTexts {
		if e = strings.TrimSpace(e); e != "" && strings.Contains(body, e) {
			return true
		}
	}
	return false
}

// replyTarget returns the event evt replies to, or "".
func replyTarget(evt *event.Event) id.EventID {
	rel, _ := evt.Content.Raw["m.relates_to"].(map[string]any)
	irt, _ := rel["m.in_reply_to"].(map[string]any)
	target, _ := irt["event_id"].(string)
	return id.EventID(target)
}

// mentions reports whether evt names user in its m.mentions.
func mentions(evt *event.Event, user id.UserID) bool {
	m, _ := evt.Content.Raw["m.mentions"].(map[string]any)
	ids, _ := m["user_ids"].([]any)
	for _, u := range ids {
		if u == string(user) {
			return true
		}
	}
	return false
}

// sentBy reports whether evt exists and was sent by user.
func sentBy(evt *event.Event, user id.UserID) bool { return evt != nil && evt.Sender == user }

// findEvent returns the stored event with ID ev, or nil.
func findEvent(events []*event.Event, ev id.EventID) *event.Event {
	if ev == "" {
		return nil
	}
	for _, e := range events {
		if e.ID == ev {
			return e
		}
	}
	return nil
}

// quote names a message by its first words, or by its ID when it is not
// among the stored events.
func quote(events []*event.Event, ev id.EventID) string {
	e := findEvent(events, ev)
	if e == nil {
		return string(ev)
	}
	text := []rune(strings.Join(strings.Fields(plainBody(e)), " "))
	if len(text) > maxQuoteRunes {
		return fmt.Sprintf("%q", string(text[:maxQuoteRunes])+"…")
	}
	return fmt.Sprintf("%q", string(text))
}

// explainingLine picks the log line that best explains what happened to
// the message ev: Lisa's logs name messages by their hashed ID. The first
// error or warning about it wins, then the first line with a failure
// code, then the last line about it.
func explainingLine(logs []string, ev id.EventID) string {
	if ev == "" {
		return ""
	}
	hash := messages.Hash(string(ev))
	var coded, last string
	for _, line := range logs {
		var rec struct {
			Level string `json:"level"`
			Event string `json:"event"`
			Code  string `json:"code"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Event != hash {
			continue
		}
		if rec.Level == "ERROR" || rec.Level == "WARN" {
			return line
		}
		if coded == "" && rec.Code != "" && rec.Code != string(messages.CodeOK) {
			coded = line
		}
		last = line
	}
	switch {
	case coded != "":
		return coded
	case last != "":
		return last
	}
	return noExplainingLine + " (event " + hash + ")"
}

// printChecks prints the self-check's outcome: one line per check, and
// under a failed one what is wrong and the log line that explains it.
func printChecks(w io.Writer, checks []Check) (failed []Check) {
	fmt.Fprintln(w, "\n--- self-check (from the events the homeserver stores) ---")
	for _, c := range checks {
		if c.Passed() {
			fmt.Fprintf(w, "ok      %s\n", c.Name)
			continue
		}
		failed = append(failed, c)
		fmt.Fprintf(w, "FAILED  %s: %s\n", c.Name, c.Problem)
		if c.Log != "" {
			fmt.Fprintf(w, "        log: %s\n", c.Log)
		}
	}
	if len(failed) == 0 {
		fmt.Fprintf(w, "--- all %d checks passed ---\n", len(checks))
	} else {
		fmt.Fprintf(w, "--- %d of %d checks failed ---\n", len(failed), len(checks))
	}
	return failed
}
