package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
  journal <room> [n]      the last n journal events of a room (no message bodies)
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
		fmt.Fprintln(tw, "ROOM\tRUNNING\tSTATE\tQUEUE\tACTIVE\tANSWERED\tLAST REPLY")
		for _, r := range rows {
			last := "-"
			if r.LastReplyUnix > 0 {
				last = time.Unix(r.LastReplyUnix, 0).UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%v\t%s\t%d\t%s\t%d\t%s\n", r.Room, r.Running, r.State, r.Queue, orDash(r.Active), r.Answered, last)
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

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// healthCmd is `lisa health`: exit 0 healthy, 1 degraded, 2 not reachable,
// with a JSON summary on stdout.
func healthCmd(_ context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "health", "(--config FILE | --socket PATH)")
	cfgPath := fs.String("config", "", "configuration file (to find the admin socket)")
	socket := fs.String("socket", "", "admin socket path")
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
