package doctor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/lisabot/lisa/config"
)

// Status is the outcome of a check.
type Status int

// The outcomes, from best to worst.
const (
	// OK: nothing to do.
	OK Status = iota
	// Warning: Lisa works, but something should be looked at.
	Warning
	// Failed: Lisa cannot work like this.
	Failed
	// Skipped: not checked, because a check it needs failed. It counts
	// as failed: that failure is its reason.
	Skipped
)

// String returns "ok", "warning", "failed" or "skipped".
func (s Status) String() string {
	switch s {
	case OK:
		return "ok"
	case Warning:
		return "warning"
	case Failed:
		return "failed"
	case Skipped:
		return "skipped"
	}
	return fmt.Sprintf("status(%d)", int(s))
}

// Result is one line of the report.
type Result struct {
	// Section is the section the check belongs to ("homeserver").
	Section string
	// Status is the outcome.
	Status Status
	// Message says what was found. It never holds a secret.
	Message string
	// Fix names what to change, a configuration key or a server setting;
	// empty when there is nothing to change.
	Fix string
}

// Check is one check of a section. Run returns its lines (usually one;
// the rooms check gives one per room); their Section is filled in by the
// runner.
type Check struct {
	// Name identifies the check in its section.
	Name string
	// Timeout returns the bound of Run: its context ends then, and a Run
	// that does not return a second later is reported as failed and left
	// behind. Nil means [DefaultCheckTimeout].
	Timeout func(e *Env) time.Duration
	// Run performs the check.
	Run func(ctx context.Context, e *Env) []Result
}

// Section is a named group of checks, run in order; `lisa doctor --only`
// selects sections by name.
type Section struct {
	// Name is the section's name on the command line and in the report.
	Name string
	// Checks run one after the other.
	Checks []Check
}

// DefaultRequestTimeout bounds one request to a server.
const DefaultRequestTimeout = 5 * time.Second

// DefaultCheckTimeout bounds a check that sets no Timeout of its own.
const DefaultCheckTimeout = 2 * DefaultRequestTimeout

// abandonAfter is how long the runner waits, after a check's context
// ended, for the check to return before reporting it as stuck.
const abandonAfter = time.Second

// Sections returns every section, in report order. The configuration
// section is loaded before the others run (they need it).
func Sections() []Section {
	return []Section{
		configSection(),
		homeserverSection(),
		roomsSection(),
		llmSection(),
		searchSection(),
		converterSection(),
		dataDirSection(),
		adminSection(),
	}
}

// SectionNames returns the names of [Sections], in order.
func SectionNames() []string {
	var out []string
	for _, s := range Sections() {
		out = append(out, s.Name)
	}
	return out
}

// Options say what to check and how.
type Options struct {
	// ConfigPath is the configuration file.
	ConfigPath string
	// Getenv resolves env: secret references.
	Getenv config.LookupEnv
	// Only selects sections by name; empty selects all. The
	// configuration is loaded in any case.
	Only []string
	// RequestTimeout bounds one request to a server; zero means
	// [DefaultRequestTimeout].
	RequestTimeout time.Duration
	// OnResult, if set, is given each result as soon as it and every
	// result before it are known, in report order.
	OnResult func(Result)
}

// Report is the outcome of [Run].
type Report struct {
	// Results are the lines, in report order.
	Results []Result
}

// Exit codes of a report.
const (
	ExitOK       = 0 // every check passed
	ExitWarnings = 1 // Lisa works, with warnings
	ExitFailed   = 2 // Lisa cannot work like this
)

// Worst returns the worst status of the report; Skipped counts as Failed.
func (r Report) Worst() Status {
	worst := OK
	for _, res := range r.Results {
		s := res.Status
		if s == Skipped {
			s = Failed
		}
		worst = max(worst, s)
	}
	return worst
}

// Code returns the exit code: [ExitOK], [ExitWarnings] or [ExitFailed].
func (r Report) Code() int {
	switch r.Worst() {
	case OK:
		return ExitOK
	case Warning:
		return ExitWarnings
	}
	return ExitFailed
}

// Count returns how many results have status s.
func (r Report) Count(s Status) int {
	n := 0
	for _, res := range r.Results {
		if res.Status == s {
			n++
		}
	}
	return n
}

// ErrUnknownSection is returned by [Run] for a name in Options.Only that
// names no section.
var ErrUnknownSection = errors.New("unknown section")

// Run loads the configuration and runs the selected sections. Sections
// run side by side, the checks of a section one after another, each
// within its timeout, so the whole run takes about as long as its slowest
// section even when a server never answers. An invalid configuration
// ends the run after the configuration's lines. The error is only for
// Options naming an unknown section.
func Run(ctx context.Context, opts Options) (Report, error) {
	all := Sections()
	selected, err := selectSections(all, opts.Only)
	if err != nil {
		return Report{}, err
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	var rep Report
	var secrets []string
	emit := func(r Result) {
		r = scrub(r, secrets)
		rep.Results = append(rep.Results, r)
		if opts.OnResult != nil {
			opts.OnResult(r)
		}
	}
	res, err := config.LoadAndResolve(opts.ConfigPath, opts.Getenv)
	if err != nil {
		for _, r := range configProblems(err) {
			emit(r)
		}
		return rep, nil
	}
	secrets = res.Secrets()
	env := newEnv(ctx, res, opts.ConfigPath, opts.RequestTimeout)
	defer env.close()

	outs := make([]chan []Result, len(selected))
	for i, s := range selected {
		outs[i] = make(chan []Result, 1)
		go func() { outs[i] <- runSection(ctx, env, s) }()
	}
	for _, out := range outs {
		for _, r := range <-out {
			emit(r)
		}
	}
	return rep, nil
}

// selectSections returns the sections named in only (all when empty), in
// report order.
func selectSections(all []Section, only []string) ([]Section, error) {
	if len(only) == 0 {
		return all, nil
	}
	names := map[string]bool{}
	for _, n := range only {
		n = strings.TrimSpace(n)
		if !slices.ContainsFunc(all, func(s Section) bool { return s.Name == n }) {
			return nil, fmt.Errorf("%w %q (sections: %s)", ErrUnknownSection, n, strings.Join(SectionNames(), ", "))
		}
		names[n] = true
	}
	var out []Section
	for _, s := range all {
		if names[s.Name] {
			out = append(out, s)
		}
	}
	return out, nil
}

// runSection runs the checks of s in order.
func runSection(ctx context.Context, e *Env, s Section) []Result {
	var out []Result
	for _, c := range s.Checks {
		for _, r := range runCheck(ctx, e, c) {
			r.Section = s.Name
			out = append(out, r)
		}
	}
	return out
}

// runCheck runs c within its timeout. A check that does not return
// within abandonAfter of its context's end is reported as stuck and left
// to finish on its own.
func runCheck(ctx context.Context, e *Env, c Check) []Result {
	limit := DefaultCheckTimeout
	if c.Timeout != nil {
		limit = c.Timeout(e)
	}
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	done := make(chan []Result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- []Result{{Status: Failed, Message: fmt.Sprintf("the %s check crashed: %v", c.Name, p)}}
			}
		}()
		done <- c.Run(cctx, e)
	}()
	select {
	case rs := <-done:
		return rs
	case <-cctx.Done():
	}
	select {
	case rs := <-done:
		return rs
	case <-time.After(abandonAfter):
		return []Result{{Status: Failed, Message: fmt.Sprintf("the %s check did not finish within %s", c.Name, limit)}}
	}
}

// scrub replaces every secret value in r's text by a marker (the checks
// never put one there; this makes sure) and control characters, which a
// server's answer could carry to the terminal, by "?".
func scrub(r Result, secrets []string) Result {
	clean := func(s string) string {
		for _, sec := range secrets {
			if sec != "" {
				s = strings.ReplaceAll(s, sec, "[REDACTED]")
			}
		}
		return strings.Map(func(c rune) rune {
			if unicode.IsControl(c) {
				return '?'
			}
			return c
		}, s)
	}
	r.Message, r.Fix = clean(r.Message), clean(r.Fix)
	return r
}
