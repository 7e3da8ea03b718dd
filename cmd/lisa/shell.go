package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lisabot/lisa/adapters/admin"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/daemon"
)

const shellHelp = `commands:
  actors                  the actor tree: mailbox length, posted, received, restarts, failures, age
  rooms                   per room: state, queue depth, active invocation, replies, last reply
  invocations [room]      queued invocations: state, attempts, age, last error code
  held [room]             replies the homeserver refused (M_FORBIDDEN), held until Lisa may post again
  resend [room]           send the held replies now (each looked up first, then sent once)
  journal <room> [n]      the last n journal events of a room (no message bodies)
  why <event_id>          what became of one event: its outcome and, for an invocation, its path
  trail [room] [n]        the last n event outcomes (default 20), of one room or all
  health                  the health summary (as lisa health)
  digests                 per room, a digest of its state (a journal replay must reproduce it)
  usage [room] [days]     LLM tokens per room and day (default today), today's share of each budget; ~ marks estimates
  help                    this text
  quit                    leave the shell`

// socketPath finds the admin socket: --socket, or the configuration's
// runtime.admin_socket (default <data_dir>/admin.sock), relative paths
// taken from the configuration file's directory.
func socketPath(c *cli, cfgPath, socket string) (string, error) {
	if socket != "" {
		return socket, nil
	}
	if cfgPath == "" {
		return "", fmt.Errorf("give --config FILE or --socket PATH")
	}
	cfg, err := config.Load(cfgPath, c.getenv)
	if err != nil {
		return "", err
	}
	p := cfg.WithDefaults().Runtime.AdminSocket
	if p == "" {
		return "", fmt.Errorf("runtime.data_dir is not set")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(cfgPath), p)
	}
	return p, nil
}

// shellCmd is `lisa shell`: commands from stdin (interactive or piped),
// answers from the running daemon's admin socket.
func shellCmd(_ context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "shell", "(--config FILE | --socket PATH) [--json]")
	cfgPath := fs.String("config", "", "configuration file (to find the admin socket)")
	socket := fs.String("socket", "", "admin socket path")
	asJSON := fs.Bool("json", false, "print raw JSON answers")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	path, err := socketPath(c, *cfgPath, *socket)
	if err != nil {
		fmt.Fprintln(c.stderr, "lisa shell:", err)
		return exitUsage
	}
	cl, err := admin.Dial(path, 2*time.Second)
	if err != nil {
		fmt.Fprintln(c.stderr, "lisa shell:", err)
		return exitFailure
	}
	defer cl.Close()
	interactive := false
	if f, ok := c.stdin.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			interactive = true
		}
	}
	sc := bufio.NewScanner(c.stdin)
	for {
		if interactive {
			fmt.Fprint(c.stdout, "lisa> ")
		}
		if !sc.Scan() {
			return exitOK
		}
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "quit", "exit":
			return exitOK
		case "help", "?":
			fmt.Fprintln(c.stdout, shellHelp)
			continue
		}
		data, err := cl.Call(fields[0], fields[1:]...)
		if err != nil {
			fmt.Fprintln(c.stdout, "error:", err)
			continue
		}
		if *asJSON {
			fmt.Fprintln(c.stdout, string(data))
			continue
		}
		printTable(c.stdout, fields[0], data)
	}
}

// printTable renders an answer for a terminal.
func printTable(w io.Writer, cmd string, data json.RawMessage) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	defer tw.Flush()
	switch cmd {
	case "actors":
		var rows []daemon.ActorRow
		_ = json.Unmarshal(data, &rows)
		fmt.Fprintln(tw, "ACTOR\tMAILBOX\tPOSTED\tRECEIVED\tRESTARTS\tFAILURES\tAGE")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\n", r.ID, r.Mailbox, r.Posted, r.Received, r.Restarts, r.Failures, time.Duration(r.AgeSeconds)*time.Second)
		}
	case "rooms":
		var rows []daemon.RoomRow
		_ = json.Unmarshal(data, &rows)
		fmt.Fprintln(tw, "ROOM\tRUNNING\tSTATE\tQUEUE\tACTIVE\tANSWERED\tHELD\tLAST REPLY")
		for _, r := range rows {
			last := "-"
			if r.LastReplyUnix > 0 {
				last = time.Unix(r.LastReplyUnix, 0).UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%v\t%s\t%d\t%s\t%d\t%d\t%s\n", r.Room, r.Running, r.State, r.Queue, orDash(r.Active), r.Answered, r.Held, last)
		}
	case "held":
		var rows []daemon.HeldRow
		_ = json.Unmarshal(data, &rows)
		fmt.Fprintln(tw, "ROOM\tEVENT\tAGE\tEXPIRES IN\tERROR REPLY")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\n", r.Room, r.Event, time.Duration(r.AgeSeconds)*time.Second,
				time.Duration(r.ExpiresInSeconds)*time.Second, r.ErrorReply)
		}
	case "resend":
		var rows []daemon.ResendRow
		_ = json.Unmarshal(data, &rows)
		fmt.Fprintln(tw, "ROOM\tRELEASED\tNOTE")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", r.Room, r.Released, orDash(r.Error))
		}
	case "invocations":
		var rows []daemon.InvocationRow
		_ = json.Unmarshal(data, &rows)
		fmt.Fprintln(tw, "ROOM\tEVENT\tSTATE\tATTEMPTS\tAGE\tLAST ERROR")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", r.Room, r.Event, r.State, r.Attempts, time.Duration(r.AgeSeconds)*time.Second, orDash(r.LastCode))
		}
	case "usage":
		printTokenUsage(tw, data)
	case "why":
		var r daemon.WhyReport
		_ = json.Unmarshal(data, &r)
		printWhy(tw, r)
	case "trail":
		var r daemon.TrailReport
		_ = json.Unmarshal(data, &r)
		printTrail(tw, r)
	case "journal":
		var lines []string
		_ = json.Unmarshal(data, &lines)
		for _, l := range lines {
			fmt.Fprintln(tw, l)
		}
	default:
		var v any
		_ = json.Unmarshal(data, &v)
		b, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintln(tw, string(b))
	}
}

// printWhy renders the answer of "why".
func printWhy(w io.Writer, r daemon.WhyReport) {
	if !r.Seen || r.Entry == nil {
		fmt.Fprintf(w, "%s: Lisa never saw this event (it is in no allowed room's trail). Likely causes:\n", r.EventID)
		for _, h := range r.Hints {
			fmt.Fprintf(w, "  - %s\n", h)
		}
		return
	}
	e := r.Entry
	fmt.Fprintf(w, "event\t%s\n", e.EventID)
	fmt.Fprintf(w, "room\t%s\n", e.Room)
	fmt.Fprintf(w, "sender\t%s\n", orDash(e.Sender))
	fmt.Fprintf(w, "kind\t%s\n", orDash(e.Kind))
	fmt.Fprintf(w, "seen\t%s\n", msTime(e.Seen))
	fmt.Fprintf(w, "outcome\t%s\n", e.Outcome)
	fmt.Fprintf(w, "meaning\t%s\n", r.Meaning)
	if e.End != nil {
		if e.End.ReplyEventID != "" {
			fmt.Fprintf(w, "reply\t%s\n", e.End.ReplyEventID)
		}
		if e.End.AnswerMs > 0 {
			fmt.Fprintf(w, "time to answer\t%s\n", time.Duration(e.End.AnswerMs)*time.Millisecond)
		}
		fmt.Fprintf(w, "llm requests\t%d\n", e.End.LLMRequests)
		fmt.Fprintf(w, "tool calls\t%s\n", toolCalls(e.End.ToolCalls))
		if e.End.ErrorCode != "" {
			fmt.Fprintf(w, "error code\t%s\n", e.End.ErrorCode)
		}
	}
	for i, s := range e.Path {
		label := ""
		if i == 0 {
			label = "path"
		}
		line := s.What
		if s.Attempt > 0 {
			line += fmt.Sprintf(" (attempt %d)", s.Attempt)
		}
		if s.Code != "" {
			line += " " + s.Code
		}
		fmt.Fprintf(w, "%s\t%s  %s\n", label, msTime(s.AtMs), line)
	}
}

// printTrail renders the answer of "trail".
func printTrail(w io.Writer, r daemon.TrailReport) {
	fmt.Fprintln(w, "SEEN\tROOM\tEVENT\tSENDER\tKIND\tOUTCOME\tREPLY\tTIME TO ANSWER")
	for _, e := range r.Entries {
		reply, took := "-", "-"
		if e.End != nil {
			reply = orDash(e.End.ReplyEventID)
			if e.End.AnswerMs > 0 {
				took = (time.Duration(e.End.AnswerMs) * time.Millisecond).String()
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", msTime(e.Seen), e.Room, e.EventID, orDash(e.Sender), orDash(e.Kind), e.Outcome, reply, took)
	}
	for _, room := range slices.Sorted(maps.Keys(r.NotAllowed)) {
		fmt.Fprintf(w, "not allowed (never read; matrix.allowed_room_ids)\t%s\t%d events\n", room, r.NotAllowed[room])
	}
}

// toolCalls renders tool calls by outcome, "ok=2 fetch_timeout=1".
func toolCalls(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// msTime renders a time in Unix milliseconds as UTC RFC 3339.
func msTime(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// healthCmd is `lisa health`: exit 0 healthy, 1 degraded, 2 not reachable,
// with a JSON summary on stdout.
func healthCmd(_ context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "health", "(--config FILE | --socket PATH) [--json]")
	cfgPath := fs.String("config", "", "configuration file (to find the admin socket)")
	socket := fs.String("socket", "", "admin socket path")
	_ = fs.Bool("json", true, "print the JSON summary (the only format; accepted for scripts that ask for it)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	unreachable := func(err error) int {
		b, _ := json.Marshal(daemon.HealthReport{Status: "unreachable", Reasons: []string{err.Error()}})
		fmt.Fprintln(c.stdout, string(b))
		return 2
	}
	path, err := socketPath(c, *cfgPath, *socket)
	if err != nil {
		return unreachable(err)
	}
	cl, err := admin.Dial(path, 2*time.Second)
	if err != nil {
		return unreachable(err)
	}
	defer cl.Close()
	data, err := cl.Call("health")
	if err != nil {
		return unreachable(err)
	}
	var r daemon.HealthReport
	if err := json.Unmarshal(data, &r); err != nil {
		return unreachable(err)
	}
	fmt.Fprintln(c.stdout, string(data))
	switch r.Status {
	case "healthy":
		return exitOK
	case "failed":
		return 2 // cannot work: as bad as not reachable
	}
	return 1
}
