package chaos

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Log messages of `lisa run` that explain an exit of hers. Like the
// constants of lisaproc.go they are part of the daemon's contract with
// this package.
const (
	logPanicked = "actor panicked"
	logLost     = "an essential actor stopped for good; exiting so Lisa can be restarted"
	logRefused  = "cannot start"
	// injectedPanic starts the text of every panic an ActorPlan injects.
	injectedPanic = "chaos: injected "
)

// Names of the causes of Lisa's own exits (ExitCause.Name).
const (
	// ExitActorStopped: a top-level actor (sync, rooms, tools) was
	// stopped by an injected stop fault; Lisa exits so that her service
	// manager restarts her (docs/architecture.md, "Lost top-level
	// actors"). By design.
	ExitActorStopped = "essential_actor_stopped"
	// ExitActorFailing: a top-level actor exhausted its restarts under
	// injected panics. By design, for the same reason.
	ExitActorFailing = "essential_actor_failing"
	// ExitActorLost: a top-level actor was lost without an injected fault
	// on it, or after a panic that was not injected. A bug.
	ExitActorLost = "essential_actor_lost"
	// ExitStoreSync: a sync of the store failed; Lisa stops sending and
	// exits, and recovers by replay from what is on disk. By design.
	ExitStoreSync = "store_sync_failed"
	// ExitStartRefused: Lisa refused to start on a configuration or an
	// environment the operator must fix (pandoc missing, the access token
	// belongs to another user or device). By design.
	ExitStartRefused = "start_refused"
	// ExitGoPanic: the Go runtime ended the process (a panic outside the
	// actors' supervision, a fatal error). A bug.
	ExitGoPanic = "go_panic"
	// ExitUnexplained: any other exit; the cause's detail is her last
	// ERROR line. A bug until it is understood and named.
	ExitUnexplained = "unexplained"
)

// ExitCause is one distinct reason for which Lisa exited by herself
// during a campaign (not killed by it, not at a failpoint, not stopped by
// its SIGTERM).
type ExitCause struct {
	// Name is one of the Exit* names.
	Name string `json:"name"`
	// Detail is the normalised evidence: her first fatal ERROR line (a
	// store sync failure, a lost top-level actor) or else her last ERROR
	// line (message, actor, code, error) that is not a supervised actor
	// panic, with IDs, addresses, times and large numbers replaced so
	// that identical causes group.
	Detail string `json:"detail"`
	// Status is how the process ended ("exit:1", "signal:aborted", ...).
	Status string `json:"status"`
	// ByDesign: an exit Lisa means to take. Any other is a bug to fix.
	ByDesign bool `json:"by_design"`
	Count    int  `json:"count"`
	// FirstLaunch is the launch number of the first process that exited
	// so; "chaos: lisa launched" lines in lisa.log mark each launch.
	FirstLaunch int `json:"first_launch"`
}

// exitEvidence is what one Lisa process's log says about how she ended.
type exitEvidence struct {
	lastError string // normalised last ERROR line that is not a supervised panic
	lastMsg   string // its message
	lastErr   string // its normalised error
	// A fatal cause stays the cause whatever she logs on her way out:
	// the first store sync failure, the first lost top-level actor.
	storeSync string // its normalised line
	lostActor string // the actor
	// injected counts, per top-level actor ("sync", "rooms", "tools"),
	// the faults injected into that actor itself, by kind.
	injected map[string]map[string]int
	// panics is, per top-level actor, the first panic of that actor
	// itself that was not injected.
	panics  map[string]string
	goPanic string // first line of a Go runtime panic or fatal error
}

func newExitEvidence() *exitEvidence {
	return &exitEvidence{injected: map[string]map[string]int{}, panics: map[string]string{}}
}

// logRecord is the part of a line of Lisa's JSON log the campaign reads.
type logRecord struct {
	Msg      string `json:"msg"`
	Level    string `json:"level"`
	Kind     string `json:"kind"`
	Point    string `json:"failpoint"`
	Leaked   *int   `json:"leaked"`
	Routines string `json:"goroutines"`
	Err      string `json:"err"`
	Code     string `json:"code"`
	Actor    string `json:"actor"`
	Panic    string `json:"panic"`
	Transit  string `json:"transition"`
}

// record takes one JSON record of the process's log.
func (e *exitEvidence) record(rec logRecord) {
	top, own := topLevelActor(rec.Actor)
	switch {
	case rec.Msg == logFault && own:
		if e.injected[top] == nil {
			e.injected[top] = map[string]int{}
		}
		e.injected[top][rec.Kind]++
	case rec.Msg == logPanicked:
		// A panic in an actor is handled by its supervisor: not by
		// itself a reason to exit, but evidence if its actor is lost.
		if own && !strings.HasPrefix(rec.Panic, injectedPanic) {
			if _, seen := e.panics[top]; !seen {
				e.panics[top] = normalise(rec.Panic)
			}
		}
		return
	}
	if rec.Level != "ERROR" || rec.Msg == logLeakCheck {
		return
	}
	actor := ""
	if rec.Actor != "" {
		actor = normaliseActor(rec.Actor)
	}
	e.lastMsg, e.lastErr = rec.Msg, normalise(rec.Err)
	parts := []string{normalise(rec.Msg)}
	if actor != "" {
		parts = append(parts, "actor="+actor)
	}
	if rec.Code != "" {
		parts = append(parts, "code="+rec.Code)
	}
	if e.lastErr != "" {
		parts = append(parts, "err="+e.lastErr)
	}
	e.lastError = clip(strings.Join(parts, " "), 240)
	switch {
	case e.storeSync == "" && isStoreSyncFailure(rec.Msg, rec.Code, e.lastErr):
		e.storeSync = e.lastError
	case e.lostActor == "" && rec.Msg == logLost:
		e.lostActor = actor
	}
}

// raw takes a line of the process's output that is not JSON: the Go
// runtime writes its panics and fatal errors so.
func (e *exitEvidence) raw(line string) {
	if e.goPanic != "" {
		return
	}
	for _, p := range []string{"panic: ", "fatal error: ", "SIGSEGV", "SIGABRT"} {
		if strings.HasPrefix(line, p) {
			e.goPanic = clip(normalise(line), 240)
			return
		}
	}
}

// cause names why a process that ended with status by itself exited.
func (e *exitEvidence) cause(status string) ExitCause {
	c := ExitCause{Status: status, Detail: e.lastError}
	switch {
	case e.goPanic != "":
		c.Name, c.Detail = ExitGoPanic, e.goPanic
	case e.storeSync != "":
		c.Name, c.ByDesign, c.Detail = ExitStoreSync, true, e.storeSync
	case e.lostActor != "":
		c.Name, c.ByDesign, c.Detail = e.lost(e.lostActor)
	case strings.HasPrefix(e.lastMsg, logRefused) && refusalByDesign(e.lastMsg, e.lastErr):
		c.Name, c.ByDesign = ExitStartRefused, true
	default:
		c.Name = ExitUnexplained
		if c.Detail == "" {
			c.Detail = "no ERROR line in her log"
		}
	}
	return c
}

// lost names the loss of the top-level actor: by design when the
// campaign's own faults took it down, a bug otherwise.
func (e *exitEvidence) lost(actor string) (name string, byDesign bool, detail string) {
	if p, ok := e.panics[actor]; ok {
		return ExitActorLost, false, fmt.Sprintf("%s lost after a panic that was not injected: %s", actor, p)
	}
	kinds := e.injected[actor]
	if kinds[StopAfterSend.String()] > 0 {
		return ExitActorStopped, true, fmt.Sprintf("%s stopped by an injected %s fault", actor, StopAfterSend)
	}
	panics := 0
	for k, n := range kinds {
		if k != StopAfterSend.String() {
			panics += n
		}
	}
	if panics > 0 {
		return ExitActorFailing, true, fmt.Sprintf("%s exhausted its restarts under injected panics", actor)
	}
	return ExitActorLost, false, fmt.Sprintf("%s stopped for good with no fault injected into it", actor)
}

// isStoreSyncFailure recognises the daemon's fatal store sync failure.
func isStoreSyncFailure(msg, code, err string) bool {
	if code == ExitStoreSync {
		return true
	}
	text := strings.ToLower(msg + " " + err)
	return strings.Contains(text, "store sync failed") || strings.Contains(text, "store_sync_failed")
}

// refusalByDesign: Lisa refuses to start on what only the operator can
// fix. A refusal on anything else (a homeserver answer she could not
// read, say) is a fault she should have waited out.
func refusalByDesign(msg, err string) bool {
	switch {
	case strings.Contains(msg, "pandoc"), strings.Contains(msg, "converter"):
		// pandoc (web.converter = "pandoc") missing or too old; not a
		// check cut short or timed out.
		return strings.Contains(err, "was not found") || strings.Contains(err, "is too old") ||
			strings.Contains(err, "did not report a pandoc version")
	case strings.Contains(err, "access token belongs to"): // whoami mismatch
		return true
	case strings.Contains(err, "does not accept the access token"):
		return true
	}
	return false
}

// topLevelActor returns the top-level actor an actor log ID belongs to
// ("app/rooms/Op8y71FQeBpq/inv-5" → "rooms") and whether the ID is that
// actor itself.
func topLevelActor(id string) (top string, own bool) {
	rest, ok := strings.CutPrefix(id, "app/")
	if !ok || rest == "" {
		return "", false
	}
	top, below, _ := strings.Cut(rest, "/")
	return top, below == ""
}

// normaliseActor keeps an actor's path with its room's log hash and
// numbers replaced ("app/rooms/Op8y71FQeBpq/inv-5" → "rooms/ROOM/inv-N").
func normaliseActor(id string) string {
	top, own := topLevelActor(id)
	switch {
	case top == "":
		return normalise(id)
	case own:
		return top
	}
	segs := strings.Split(strings.TrimPrefix(id, "app/"), "/")
	for i, s := range segs[1:] {
		if top == "rooms" && i == 0 {
			segs[1] = "ROOM"
			continue
		}
		segs[i+1] = digits.ReplaceAllString(s, "N")
	}
	return strings.Join(segs, "/")
}

var digits = regexp.MustCompile(`[0-9]+`)

var normalisers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`![A-Za-z0-9._=\-/+]+:[A-Za-z0-9.\-]+(:\d+)?`), "!room"},
	{regexp.MustCompile(`\$[A-Za-z0-9._=\-/+]+(:[A-Za-z0-9.\-]+(:\d+)?)?`), "$event"},
	{regexp.MustCompile(`@[a-z0-9._=\-/]+:[A-Za-z0-9.\-]+(:\d+)?`), "@user"},
	{regexp.MustCompile(`\b\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)?`), "TIME"},
	{regexp.MustCompile(`\b(\d{1,3}\.){3}\d{1,3}(:\d+)?|\[::1\](:\d+)?|localhost:\d+`), "ADDR"},
	// Durations, sizes, ports and counts of four digits or more; short
	// integers (HTTP statuses, small counts) stay.
	{regexp.MustCompile(`\b\d+\.\d+|\b\d{4,}\b`), "N"},
	// Log hashes, transaction IDs and other mixed tokens.
	{regexp.MustCompile(`\b[A-Za-z0-9_\-]*[0-9][A-Za-z0-9_\-]*[A-Za-z][A-Za-z0-9_\-]*\b|\b[A-Za-z0-9_\-]*[A-Za-z][A-Za-z0-9_\-]*[0-9][A-Za-z0-9_\-]*\b`), "ID"},
}

// normalise replaces what differs between identical causes (IDs,
// addresses, times, large numbers).
func normalise(s string) string {
	for _, n := range normalisers {
		s = n.re.ReplaceAllLiteralString(s, n.with)
	}
	return s
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// exitCauses gathers causes by name and detail.
type exitCauses map[string]*ExitCause

func (m exitCauses) add(c ExitCause, launch int) {
	key := c.Name + "\x00" + c.Detail + "\x00" + c.Status
	if have, ok := m[key]; ok {
		have.Count++
		return
	}
	c.Count, c.FirstLaunch = 1, launch
	m[key] = &c
}

// sorted lists the causes, bugs first, then by count.
func (m exitCauses) sorted() []ExitCause {
	var out []ExitCause
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, *m[k])
	}
	slices.SortStableFunc(out, func(a, b ExitCause) int {
		if a.ByDesign != b.ByDesign {
			if !a.ByDesign {
				return -1
			}
			return 1
		}
		return b.Count - a.Count
	})
	return out
}
