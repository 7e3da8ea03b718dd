package chaos

import (
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what a campaign did and whether Lisa kept her promises.
type Report struct {
	Seed  uint64 `json:"seed"`
	Rooms int    `json:"rooms"`
	// Homeserver and HomeserverVersion name the server the campaign ran
	// against ("synapse", "1.67.0"); TxnIDsSurviveRestart is what the
	// launcher says of it (homeserver.Server.TxnIDsSurviveRestart).
	Homeserver           string `json:"homeserver"`
	HomeserverVersion    string `json:"homeserver_version"`
	TxnIDsSurviveRestart bool   `json:"txn_ids_survive_restart"`
	// LateStoreWait is how long the campaign waited, after the traffic,
	// for a late store of a send a homeserver restart cut short, before
	// counting (zero on a server that stores a send within its request).
	LateStoreWait time.Duration `json:"late_store_wait_ns"`
	// Duration is the whole campaign; TrafficPhase the part with faults.
	Duration     time.Duration `json:"duration_ns"`
	TrafficPhase time.Duration `json:"traffic_phase_ns"`
	// QuietCatchUp is how long the quiet Lisa took to answer everything
	// left open by the fault phase.
	QuietCatchUp time.Duration `json:"quiet_catch_up_ns"`

	Invocations  int `json:"invocations"`   // messages Lisa had to answer (incl. sentinels)
	Chatter      int `json:"chatter"`       // messages she had to ignore
	Replies      int `json:"replies"`       // her messages on the homeserver
	ErrorReplies int `json:"error_replies"` // of which persona.generic_error
	// RepliesUnderFaults are the replies seen before the fault phase
	// ended; the rest were sent in the quiet phase. Few of them mean the
	// faults kept Lisa from working rather than testing her work.
	RepliesUnderFaults int `json:"replies_under_faults"`
	Duplicates         int `json:"duplicates"`
	// HeldReplies counts replies Lisa held back for the late-store window
	// because the homeserver may have restarted during their send.
	HeldReplies int `json:"held_replies"`
	Losses      int `json:"losses"`
	Unexpected  int `json:"unexpected"` // replies to non-invocations
	// Kinds counts the human's messages by kind (mention, thread
	// question, edit of a question, redaction of a question, ...).
	Kinds map[string]int `json:"kinds"`
	// RedactedQuestions are questions the human redacted; RedactedReplies
	// Lisa's replies found redacted; AnsweredRedacted visible replies to
	// redacted questions (a violation).
	RedactedQuestions int `json:"redacted_questions"`
	RedactedReplies   int `json:"redacted_replies"`
	AnsweredRedacted  int `json:"answered_redacted"`

	ActorFaults map[string]int `json:"actor_faults"` // by kind
	NetFaults   map[string]int `json:"net_faults"`   // "homeserver:429", "llm:reset", ...
	// NetRequests counts the requests each proxy saw while it injected
	// faults ("homeserver", "llm").
	NetRequests        map[string]int64 `json:"net_requests"`
	Kills              map[string]int   `json:"kills"` // "sigkill" or the failpoint
	HomeserverRestarts int              `json:"homeserver_restarts"`
	// HomeserverMoves counts restarts that moved the homeserver to
	// another port (its old one was taken); the proxies followed it.
	HomeserverMoves int `json:"homeserver_moves,omitempty"`
	LisaStarts      int `json:"lisa_starts"`
	// Exits counts how each process ended: "sigkill" (the campaign's),
	// "failpoint:…", "stopped" (the campaign's SIGTERM, exit 0), or
	// "exit:N" / "signal:…" (by herself; "sigterm:" before them when she
	// failed to stop cleanly).
	Exits map[string]int `json:"exits"`
	// OwnExits are the causes of the exits Lisa took by herself, with
	// counts; one not by design is a violation.
	OwnExits         []ExitCause `json:"own_exits,omitempty"`
	TotalActorFaults int         `json:"total_actor_faults"`
	TotalNetFaults   int         `json:"total_net_faults"`
	TotalKills       int         `json:"total_kills"`
	// MaxRecovery is the longest time from a kill or homeserver restart
	// to the next reply seen on the homeserver.
	MaxRecovery time.Duration `json:"max_recovery_ns"`

	RoomsReplayed    int      `json:"rooms_replayed"`
	ActorsChecked    int      `json:"actors_checked"`
	LeakedActors     []string `json:"leaked_actors,omitempty"`
	LeakedGoroutines int      `json:"leaked_goroutines"`
	TypingLeft       int      `json:"typing_left"`

	// LostEvents and DuplicatedEvents name the failing invocations as
	// "event ID (log hash)", so they can be found in Lisa's log.
	LostEvents       []string `json:"lost_events,omitempty"`
	DuplicatedEvents []string `json:"duplicated_events,omitempty"`

	Violations []string `json:"violations,omitempty"`

	// LogDir holds the campaign's log (CampaignLog) and Lisa's
	// (LisaLog); empty once they are removed.
	LogDir string `json:"log_dir,omitempty"`
}

// OwnExitCount is how many times Lisa exited by herself.
func (r *Report) OwnExitCount() int {
	n := 0
	for _, e := range r.OwnExits {
		n += e.Count
	}
	return n
}

func (r *Report) violate(format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

// OK reports whether every invariant held.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// TotalFaults is every injected fault: actor, network, kills and
// homeserver restarts.
func (r *Report) TotalFaults() int {
	return r.TotalActorFaults + r.TotalNetFaults + r.TotalKills + r.HomeserverRestarts
}

// WriteText prints the report for a terminal.
func (r *Report) WriteText(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	verdict := "PASS"
	if !r.OK() {
		verdict = "FAIL"
	}
	fmt.Fprintf(tw, "chaos campaign\t%s (seed %d; replay: go run ./cmd/lisa-chaos --seed %d%s)\n", verdict, r.Seed, r.Seed, homeserverFlag(r.Homeserver))
	fmt.Fprintf(tw, "homeserver\t%s %s (transaction IDs survive its restarts: %s; then waited %s more for late stores)\n",
		orUnknown(r.Homeserver), r.HomeserverVersion, yesNo(r.TxnIDsSurviveRestart), r.LateStoreWait)
	fmt.Fprintf(tw, "duration\t%s (faults for %s, quiet catch-up %s)\n", r.Duration, r.TrafficPhase, r.QuietCatchUp)
	fmt.Fprintf(tw, "rooms\t%d allowed + 1 not allowed\n", r.Rooms)
	fmt.Fprintf(tw, "invocations issued\t%d (and %d messages to ignore)\n", r.Invocations, r.Chatter)
	fmt.Fprintf(tw, "replies\t%d (%d of them the generic error; %d sent while faults were injected)\n", r.Replies, r.ErrorReplies, r.RepliesUnderFaults)
	fmt.Fprintf(tw, "duplicates\t%d\n", r.Duplicates)
	fmt.Fprintf(tw, "replies held (homeserver may have restarted)\t%d\n", r.HeldReplies)
	fmt.Fprintf(tw, "losses\t%d\n", r.Losses)
	fmt.Fprintf(tw, "replies to non-invocations\t%d\n", r.Unexpected)
	fmt.Fprintf(tw, "messages by kind\t%s\n", kv(r.Kinds))
	fmt.Fprintf(tw, "redacted questions\t%d (Lisa's replies redacted: %d; left standing: %d)\n", r.RedactedQuestions, r.RedactedReplies, r.AnsweredRedacted)
	fmt.Fprintf(tw, "faults injected\t%d\n", r.TotalFaults())
	fmt.Fprintf(tw, "  actor faults\t%d %s\n", r.TotalActorFaults, kv(r.ActorFaults))
	fmt.Fprintf(tw, "  network faults\t%d %s\n", r.TotalNetFaults, kv(r.NetFaults))
	fmt.Fprintf(tw, "  requests through the proxies\thomeserver %d, LLM %d\n", r.NetRequests["homeserver"], r.NetRequests["llm"])
	fmt.Fprintf(tw, "  process kills\t%d %s\n", r.TotalKills, kv(r.Kills))
	fmt.Fprintf(tw, "  homeserver restarts\t%d", r.HomeserverRestarts)
	if r.HomeserverMoves > 0 {
		fmt.Fprintf(tw, " (%d moved to another port)", r.HomeserverMoves)
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "lisa starts\t%d; exits %s\n", r.LisaStarts, kv(r.Exits))
	fmt.Fprintf(tw, "lisa's own exits\t%d\n", r.OwnExitCount())
	for _, e := range r.OwnExits {
		verdict := "BUG"
		if e.ByDesign {
			verdict = "by design"
		}
		fmt.Fprintf(tw, "  %d × %s\t%s, %s (first: launch %d): %s\n", e.Count, e.Name, verdict, e.Status, e.FirstLaunch, e.Detail)
	}
	fmt.Fprintf(tw, "max recovery time\t%s\n", r.MaxRecovery)
	fmt.Fprintf(tw, "journal replay = live state\t%d of %d rooms\n", r.RoomsReplayed, r.Rooms)
	fmt.Fprintf(tw, "leaked actors / goroutines\t%d / %d (of %d actors)\n", len(r.LeakedActors), max(0, r.LeakedGoroutines), r.ActorsChecked)
	fmt.Fprintf(tw, "rooms still showing typing\t%d\n", r.TypingLeft)
	_ = tw.Flush()
	for _, e := range r.LostEvents {
		fmt.Fprintf(w, "lost: %s\n", e)
	}
	for _, e := range r.DuplicatedEvents {
		fmt.Fprintf(w, "duplicated: %s\n", e)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(w, "VIOLATION: %s\n", v)
	}
	if r.LogDir != "" {
		fmt.Fprintf(w, "logs: %s, %s\n", filepath.Join(r.LogDir, CampaignLog), filepath.Join(r.LogDir, LisaLog))
	}
}

func kv(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return "(" + strings.Join(parts, " ") + ")"
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
