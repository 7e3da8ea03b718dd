package archtest

import (
	"bufio"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/actors/invocation"
	"github.com/lisabot/lisa/messages"
)

// The behaviour table (docs/behaviour.md) names, in its last column, the
// tests that prove each row: `TestName`s, optionally followed by the
// files they are in "(pkg/file_test.go, …)", and golden scenarios
// ("scenario `name`"). These tests keep that column honest — every test
// named exists, in the file named, every scenario is in its package — and
// keep docs/configuration.md and docs/operations.md saying what those
// tests prove about the timeout reply, the edit rule and where the prompt
// facts go.

// repoRoot is the repository, seen from this package.
const repoRoot = ".."

var (
	// testFunc matches a test function's declaration.
	testFunc = regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	// namedTest matches a test named in the behaviour table.
	namedTest = regexp.MustCompile("`(Test[A-Za-z0-9_]+)`")
	// namedFiles matches the files a group of names is in:
	// "(pkg/a_test.go, testdata/x.golden)".
	namedFiles = regexp.MustCompile(`\(([^()]*_test\.go[^()]*)\)`)
	// namedScenarios matches "scenario `a`" and "scenarios `a`, `b`".
	namedScenarios = regexp.MustCompile("scenarios? ((?:`[a-z0-9_]+`(?:, | and )?)+)")
	// backticked matches one backticked span.
	backticked = regexp.MustCompile("`([^`]+)`")
)

// testIndex maps each test function of the repository to the files
// (relative to the root, slash-separated) that declare it.
func testIndex(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != repoRoot || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		for _, m := range testFunc.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = append(out[m[1]], filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("found only %d tests: is %s the repository?", len(out), repoRoot)
	}
	return out
}

// behaviourRow is one row of the behaviour table.
type behaviourRow struct {
	line             int
	member, lisa     string
	proof            string
	tests, scenarios []string
}

// behaviourRows reads the table rows of docs/behaviour.md.
func behaviourRows(t *testing.T) []behaviourRow {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "docs", "behaviour.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []behaviourRow
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| What a member does") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 3 {
			t.Errorf("docs/behaviour.md:%d: %d cells, want 3 (member, Lisa, proved by)", n, len(cells))
			continue
		}
		r := behaviourRow{line: n, member: cells[0], lisa: cells[1], proof: strings.TrimSpace(cells[2])}
		for _, m := range namedTest.FindAllStringSubmatch(r.proof, -1) {
			r.tests = append(r.tests, m[1])
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) < 20 {
		t.Fatalf("docs/behaviour.md: only %d rows read", len(rows))
	}
	return rows
}

// TestBehaviourRowsNameTestsThatExist: every row of docs/behaviour.md
// that is built names at least one test; every test it names exists, in
// one of the files its group names ("`TestA`, `TestB` (pkg/a_test.go)";
// groups are separated by ";"); every file it names exists; and every
// golden scenario it names appears in the package of its group's files.
func TestBehaviourRowsNameTestsThatExist(t *testing.T) {
	index := testIndex(t)
	for _, r := range behaviourRows(t) {
		if strings.HasPrefix(r.proof, "Not yet") {
			continue
		}
		if len(r.tests) == 0 {
			t.Errorf("docs/behaviour.md:%d: the row names no test: %q", r.line, r.proof)
			continue
		}
		for _, group := range strings.Split(r.proof, ";") {
			var files []string
			for _, m := range namedFiles.FindAllStringSubmatch(group, -1) {
				for _, p := range strings.Split(m[1], ",") {
					p = strings.TrimSpace(p)
					if strings.HasSuffix(p, "_test.go") {
						files = append(files, p)
					}
				}
			}
			for _, p := range files {
				if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(p))); err != nil {
					t.Errorf("docs/behaviour.md:%d: names %s, which does not exist", r.line, p)
				}
			}
			for _, m := range namedTest.FindAllStringSubmatch(group, -1) {
				name := m[1]
				where, ok := index[name]
				switch {
				case !ok:
					t.Errorf("docs/behaviour.md:%d: names %s, which no _test.go file declares", r.line, name)
				case len(files) > 0 && !slices.ContainsFunc(files, func(f string) bool { return slices.Contains(where, f) }):
					t.Errorf("docs/behaviour.md:%d: names %s in %v, but it is declared in %v", r.line, name, files, where)
				}
			}
			for _, m := range namedScenarios.FindAllStringSubmatch(group, -1) {
				for _, s := range backticked.FindAllStringSubmatch(m[1], -1) {
					if !scenarioExists(t, s[1], files, index, group) {
						t.Errorf("docs/behaviour.md:%d: names scenario %s, which is in no test or testdata file of its package", r.line, s[1])
					}
				}
			}
		}
	}
}

// scenarioExists reports whether a golden scenario's name appears in a
// file of the package (test files and testdata) that holds the group's
// files or, without files, its tests.
func scenarioExists(t *testing.T, name string, files []string, index map[string][]string, group string) bool {
	t.Helper()
	dirs := map[string]bool{}
	for _, f := range files {
		dirs[filepath.Dir(filepath.FromSlash(f))] = true
	}
	if len(dirs) == 0 {
		for _, m := range namedTest.FindAllStringSubmatch(group, -1) {
			for _, f := range index[m[1]] {
				dirs[filepath.Dir(filepath.FromSlash(f))] = true
			}
		}
	}
	for dir := range dirs {
		found := false
		_ = filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || found {
				return err
			}
			if d.IsDir() {
				if path != filepath.Join(repoRoot, dir) && d.Name() != "testdata" && !strings.Contains(path, "testdata") {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasSuffix(path, "_test.go") || strings.Contains(path, "testdata") {
				if strings.Contains(filepath.Base(path), name) {
					found = true
					return nil
				}
				b, err := os.ReadFile(path)
				if err == nil && strings.Contains(string(b), name) {
					found = true
				}
			}
			return nil
		})
		if found {
			return true
		}
	}
	return false
}

// docClaim is what a doc must say where it names anchor: each unit (a
// table row, or a sentence of prose) that holds anchor must hold want
// and must not hold forbid (when set); at least one unit holds anchor.
type docClaim struct {
	doc, anchor, want, forbid string
}

// docFacts are what the docs say about the code, each tied to a test that
// proves the code does it: the behaviour row that names the test must say
// row, and every claim must hold.
var docFacts = []struct {
	name   string
	proof  string
	row    string
	claims []docClaim
}{
	{
		name:  "a timeout gets the overload reply",
		proof: "TestOverloadReplyOnTimeout", row: "`overload_error` rather than the generic error",
		claims: []docClaim{
			{doc: "configuration.md", anchor: "| `invocation_timeout_seconds` |", want: "`overload_error` is the reply", forbid: "generic_error"},
			{doc: "configuration.md", anchor: "| `overload_error` |", want: "runs out of time"},
			{doc: "configuration.md", anchor: "| `generic_error` |", want: "fails", forbid: "time"},
			{doc: "operations.md", anchor: "invocation_timeout_seconds` is spent", want: "`persona.overload_error`", forbid: "generic_error"},
		},
	},
	{
		name:  "an edit never invokes",
		proof: "TestEditNeverInvokes", row: "an edit is never an invocation",
		claims: []docClaim{
			{doc: "operations.md", anchor: "**Was it an edit?**", want: "Edits never invoke, even if the edit adds the mention"},
		},
	},
	{
		name:  "the prompt facts go in the first user message",
		proof: "TestPromptFacts", row: "The facts are not in the system prompt",
		claims: []docClaim{
			{doc: "configuration.md", anchor: "| `time_zone` |", want: "The first user message gives the current date and time", forbid: "system prompt gives"},
			{doc: "architecture.md", anchor: "the context block goes in the user message", want: "time"},
		},
	},
	{
		name:  "a spent tool budget ends in an answer",
		proof: "TestBudgetEndsInAnAnswer", row: "only if it gives none is the reply the persona's `overload_error`",
		claims: []docClaim{
			{doc: "configuration.md", anchor: "| `max_tool_calls` |", want: "the next request is the reserved one"},
			{doc: "operations.md", anchor: "keeps calling tools until `llm.max_tool_calls`", want: "answer from what it gathered"},
		},
	},
}

// TestDocsSayWhatTheCodeDoes: docs/configuration.md, docs/operations.md
// and docs/architecture.md say what the code does about the timeout
// reply, the edit rule, where the prompt facts go and the spent tool
// budget, and the behaviour row of each names the test that proves it.
// The prompt facts are also checked against the code itself.
func TestDocsSayWhatTheCodeDoes(t *testing.T) {
	index := testIndex(t)
	rows := behaviourRows(t)
	for _, f := range docFacts {
		t.Run(f.name, func(t *testing.T) {
			if _, ok := index[f.proof]; !ok {
				t.Fatalf("%s does not exist", f.proof)
			}
			found := false
			for _, r := range rows {
				if slices.Contains(r.tests, f.proof) {
					found = true
					if !strings.Contains(r.lisa, f.row) {
						t.Errorf("docs/behaviour.md:%d names %s but does not say %q", r.line, f.proof, f.row)
					}
				}
			}
			if !found {
				t.Errorf("no row of docs/behaviour.md names %s", f.proof)
			}
			for _, c := range f.claims {
				units := docUnits(t, c.doc)
				held := 0
				for _, u := range units {
					if !strings.Contains(u.text, c.anchor) {
						continue
					}
					held++
					if !strings.Contains(u.text, c.want) {
						t.Errorf("docs/%s:%d: where it names %q it must say %q:\n%s", c.doc, u.line, c.anchor, c.want, u.text)
					}
					if c.forbid != "" && strings.Contains(u.text, c.forbid) {
						t.Errorf("docs/%s:%d: where it names %q it must not say %q:\n%s", c.doc, u.line, c.anchor, c.forbid, u.text)
					}
				}
				if held == 0 {
					t.Errorf("docs/%s never names %q", c.doc, c.anchor)
				}
			}
		})
	}
}

// docUnit is a table row or a sentence of a doc, with its first line.
type docUnit struct {
	line int
	text string
}

// docUnits splits a doc under docs/ into table rows and the sentences of
// its paragraphs and list items (fenced code is left out).
func docUnits(t *testing.T, name string) []docUnit {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	var units []docUnit
	var para []string
	start, inFence := 0, false
	flush := func() {
		if len(para) > 0 {
			for _, s := range sentences(strings.Join(para, " ")) {
				units = append(units, docUnit{line: start, text: s})
			}
		}
		para = nil
	}
	for i, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "```"):
			flush()
			inFence = !inFence
		case inFence:
		case strings.HasPrefix(trimmed, "|"):
			flush()
			units = append(units, docUnit{line: i + 1, text: trimmed})
		case trimmed == "" || strings.HasPrefix(trimmed, "#") || listItem.MatchString(trimmed):
			flush()
			if trimmed != "" && !strings.HasPrefix(trimmed, "#") {
				para, start = []string{trimmed}, i+1
			}
		default:
			if len(para) == 0 {
				start = i + 1
			}
			para = append(para, trimmed)
		}
	}
	flush()
	return units
}

// listItem matches the start of a list item.
var listItem = regexp.MustCompile(`^([*-]|\d+\.)\s`)

// sentences splits prose after ".", "?" or "!" followed by a space and
// a capital letter, a backtick or an asterisk.
func sentences(p string) []string {
	var out []string
	rs := []rune(p)
	from := 0
	for i := 0; i+2 < len(rs); i++ {
		if (rs[i] == '.' || rs[i] == '?' || rs[i] == '!') && rs[i+1] == ' ' {
			next := rs[i+2]
			if next >= 'A' && next <= 'Z' || next == '`' || next == '*' {
				out = append(out, strings.TrimSpace(string(rs[from:i+1])))
				from = i + 2
			}
		}
	}
	if rest := strings.TrimSpace(string(rs[from:])); rest != "" {
		out = append(out, rest)
	}
	return out
}

// TestPromptFactsInTheFirstUserMessage: what the docs say of the prompt
// facts holds in the code — the persona's time zone is named in the first
// user message, after the room excerpt, and not in the system prompt.
func TestPromptFactsInTheFirstUserMessage(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	llm := &firstRequest{}
	_, err = invocation.Run(context.Background(), llm, nil, invocation.Prompt{Persona: "P", ContextBlock: "<room_context>EXCERPT</room_context>",
		Facts: invocation.Facts{Now: time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC), Location: berlin}}, invocation.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	m := llm.req.Messages
	if len(m) < 2 || m[0].Role != messages.RoleSystem || m[1].Role != messages.RoleUser {
		t.Fatalf("first request = %+v", m)
	}
	if strings.Contains(m[0].Content, "Europe/Berlin") || strings.Contains(m[0].Content, "2026-12-06") {
		t.Error("the system prompt holds the time or the time zone")
	}
	user := m[1].Content
	if i, j := strings.Index(user, "EXCERPT"), strings.Index(user, "in Europe/Berlin: 2026-12-06 02:00"); i < 0 || j < i {
		t.Errorf("the first user message lacks the time in the persona's zone after the excerpt:\n%s", user)
	}
}

// firstRequest is an LLM that keeps its first request and answers it.
type firstRequest struct{ req messages.ChatRequest }

func (f *firstRequest) Chat(_ context.Context, req messages.ChatRequest) (messages.ChatResponse, error) {
	if f.req.Messages == nil {
		f.req = req
	}
	return messages.ChatResponse{Content: `{"markdown":"ok","source_urls":[]}`}, nil
}
