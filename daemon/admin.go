package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/lisabot/lisa/actors/room"
	"github.com/lisabot/lisa/adapters/llm"
	"github.com/lisabot/lisa/adapters/metrics"
	"github.com/lisabot/lisa/buildinfo"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/persistence"
)

// Health thresholds: beyond these the daemon reports itself degraded.
const (
	// readyAgeLimit: a prepared reply older than this is stuck.
	readyAgeLimit = 10 * time.Minute
	// askTimeout bounds one question to an actor from the admin socket.
	askTimeout = 2 * time.Second
)

// ActorRow is one line of "actors".
type ActorRow struct {
	ID         string  `json:"id"`
	Mailbox    int     `json:"mailbox"`
	Posted     int64   `json:"posted"`
	Received   int64   `json:"received"`
	Restarts   int64   `json:"restarts"`
	Failures   int64   `json:"failures"`
	AgeSeconds float64 `json:"age_seconds"`
}

// RoomRow is one line of "rooms".
type RoomRow struct {
	Room          string `json:"room"`
	Running       bool   `json:"running"`
	State         string `json:"state"`
	Queue         int    `json:"queue"`
	Active        string `json:"active_invocation,omitempty"`
	Answered      uint64 `json:"answered"`
	LastReplyUnix int64  `json:"last_reply_unix,omitempty"`
	// Held counts the replies the homeserver refused with M_FORBIDDEN,
	// waiting for the room to be fixed (see "held", "resend").
	Held int `json:"held"`
}

// HeldRow is one line of "held": a reply the homeserver refused with
// M_FORBIDDEN, held until Lisa may post again.
type HeldRow struct {
	Room  string `json:"room"`
	Event string `json:"event"`
	// AgeSeconds counts from the first refusal; ExpiresInSeconds is how
	// long it is still kept (room.HeldTTL).
	AgeSeconds       float64 `json:"age_seconds"`
	ExpiresInSeconds float64 `json:"expires_in_seconds"`
	ErrorReply       bool    `json:"error_reply,omitempty"`
}

// ResendRow is one line of "resend": how many held replies of a room
// went back to be sent (each looked up first, then sent once with its
// original transaction ID).
type ResendRow struct {
	Room     string `json:"room"`
	Released int    `json:"released"`
	// Error says why the room did not answer or released nothing it
	// could (not running yet).
	Error string `json:"error,omitempty"`
}

// InvocationRow is one line of "invocations".
type InvocationRow struct {
	Room       string  `json:"room"`
	Event      string  `json:"event"`
	State      string  `json:"state"`
	Attempts   uint32  `json:"attempts"`
	AgeSeconds float64 `json:"age_seconds"`
	LastCode   string  `json:"last_error_code,omitempty"`
}

// HealthReport is the answer of "health" and the output of lisa health.
type HealthReport struct {
	Status string `json:"status"` // healthy, degraded, failed, unreachable
	// Build is the running binary's build info (absent when unreachable).
	Build              *buildinfo.Info `json:"build,omitempty"`
	Reasons            []string        `json:"reasons,omitempty"`
	LastSyncAgeSeconds float64         `json:"last_sync_age_seconds"`
	RoomsRunning       int             `json:"rooms_running"`
	RoomsStopped       int             `json:"rooms_stopped"`
	OldestReadySeconds float64         `json:"oldest_ready_reply_age_seconds,omitempty"`
	// HeldReplies counts replies the homeserver refused with M_FORBIDDEN,
	// waiting for a room to be fixed; any makes the daemon degraded.
	HeldReplies int `json:"held_replies,omitempty"`
	ToolQueue   int `json:"tool_queue"`
	// EncryptedRooms are allowed rooms Lisa cannot read because they are
	// end-to-end encrypted; each is also a reason (see encryption.go).
	EncryptedRooms []string `json:"encrypted_rooms,omitempty"`
	// LLMRefusing is the cause of the LLM server's last refusal while it
	// refuses every request until the configuration changes (see
	// llmRefusalReason); also a reason.
	LLMRefusing string `json:"llm_refusing,omitempty"`
}

// Handle answers admin-socket commands. It reads the mailbox registry and
// asks actors by message with short timeouts; it never reads actor state.
func (d *Daemon) Handle(_ context.Context, cmd string, args []string) (any, error) {
	switch cmd {
	case "actors":
		var rows []ActorRow
		for _, s := range d.sys.Registry.Snapshot(d.sys.Actors) {
			rows = append(rows, ActorRow{ID: s.ID, Mailbox: s.Len, Posted: s.Posted, Received: s.Received,
				Restarts: s.Restarts, Failures: s.Failures, AgeSeconds: s.Age.Round(time.Second).Seconds()})
		}
		return rows, nil
	case "rooms":
		return d.roomRows(), nil
	case "invocations":
		return d.invocationRows(args), nil
	case "held":
		return d.heldRows(args)
	case "resend":
		return d.resend(args)
	case "journal":
		return d.journal(args)
	case "health":
		return d.health(), nil
	case "why":
		return d.why(args)
	case "trail":
		return d.trailRows(args)
	case "digests":
		return d.digests()
	case "usage":
		return d.usage(args)
	case "backup":
		return d.backup(args)
	case "crash":
		if d.crashable && len(args) == 1 && slices.Contains(d.rooms, args[0]) {
			d.sys.Root.Send(d.sys.RoomPID(args[0]), &crashForTest{})
			return "crash sent", nil
		}
	}
	return nil, fmt.Errorf("unknown command %q (try help)", cmd)
}

func (d *Daemon) roomStatus(id string) (*messages.RoomStatus, bool) {
	return d.roomStatusCtx(context.Background(), id)
}

// askWithin is askTimeout, or what is left of ctx when that is less; ok
// is false when nothing is left.
func askWithin(ctx context.Context) (time.Duration, bool) {
	t := askTimeout
	if dl, ok := ctx.Deadline(); ok {
		t = min(t, time.Until(dl))
	}
	return t, ctx.Err() == nil && t > 0
}

// roomStatusCtx asks a room for its status, within ctx.
func (d *Daemon) roomStatusCtx(ctx context.Context, id string) (*messages.RoomStatus, bool) {
	t, ok := askWithin(ctx)
	if !ok {
		return nil, false
	}
	res, err := d.sys.Root.RequestFuture(d.sys.RoomPID(id), &messages.RoomStatusRequest{}, t).Result()
	st, ok := res.(*messages.RoomStatus)
	return st, err == nil && ok
}

// digests returns each room's state digest (see room.Digest), which a
// replay of its journal from the store must reproduce.
func (d *Daemon) digests() (map[string]string, error) {
	out := map[string]string{}
	for _, id := range d.rooms {
		st, ok := d.roomStatus(id)
		if !ok {
			return nil, fmt.Errorf("room %s did not answer", messages.RoomID(id))
		}
		out[id] = st.Digest
	}
	return out, nil
}

func (d *Daemon) running() map[messages.RoomID]bool { return d.runningCtx(context.Background()) }

// runningCtx asks the room supervisor which rooms run, within ctx.
func (d *Daemon) runningCtx(ctx context.Context) map[messages.RoomID]bool {
	t, ok := askWithin(ctx)
	if !ok {
		return map[messages.RoomID]bool{}
	}
	res, err := d.sys.Root.RequestFuture(d.sys.RoomsPID(), &messages.RoomsStatusRequest{}, t).Result()
	if st, ok := res.(*messages.RoomsStatus); err == nil && ok {
		return st.Running
	}
	return map[messages.RoomID]bool{}
}

func (d *Daemon) roomRows() []RoomRow {
	running := d.running()
	var rows []RoomRow
	for _, id := range d.rooms {
		row := RoomRow{Room: id, Running: running[messages.RoomID(id)], State: "stopped"}
		if st, ok := d.roomStatus(id); ok {
			row.State, row.Queue, row.Answered, row.Held = st.Phase, len(st.Queue), st.Answered, len(st.Held)
			if len(st.Queue) > 0 && st.Phase != "idle" {
				row.Active = string(st.Queue[0])
			}
			if st.LastReplyAtMs > 0 {
				row.LastReplyUnix = st.LastReplyAtMs / 1000
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func (d *Daemon) invocationRows(args []string) []InvocationRow {
	rooms := d.rooms
	if len(args) > 0 {
		rooms = args[:1]
	}
	now := time.Now()
	var rows []InvocationRow
	for _, id := range rooms {
		st, ok := d.roomStatus(id)
		if !ok {
			continue
		}
		for i, inv := range st.Invocations {
			state := "queued"
			switch {
			case inv.Ready:
				state = "reply-ready"
			case i == 0 && st.Phase != "idle":
				state = st.Phase
			}
			rows = append(rows, InvocationRow{Room: id, Event: string(inv.EventID), State: state, Attempts: inv.Attempts,
				AgeSeconds: now.Sub(time.UnixMilli(inv.QueuedAtMs)).Round(time.Second).Seconds(), LastCode: inv.LastCode})
		}
	}
	return rows
}

// roomArgs returns the rooms a command names: the one allowed room in
// args, or every allowed room.
func (d *Daemon) roomArgs(cmd string, args []string) ([]string, error) {
	switch {
	case len(args) == 0:
		return d.rooms, nil
	case len(args) == 1 && slices.Contains(d.rooms, args[0]):
		return args, nil
	}
	return nil, fmt.Errorf("usage: %s [allowed room ID]", cmd)
}

// heldRows lists the held replies of one room or all.
func (d *Daemon) heldRows(args []string) ([]HeldRow, error) {
	rooms, err := d.roomArgs("held", args)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	rows := []HeldRow{}
	for _, id := range rooms {
		st, ok := d.roomStatus(id)
		if !ok {
			continue
		}
		for _, h := range st.Held {
			at := time.UnixMilli(h.ForbiddenAtMs)
			rows = append(rows, HeldRow{Room: id, Event: string(h.EventID), ErrorReply: h.ErrorReply,
				AgeSeconds:       now.Sub(at).Round(time.Second).Seconds(),
				ExpiresInSeconds: max(at.Add(room.HeldTTL).Sub(now), 0).Round(time.Second).Seconds()})
		}
	}
	return rows, nil
}

// resend asks one room or all to send their held replies again.
func (d *Daemon) resend(args []string) ([]ResendRow, error) {
	rooms, err := d.roomArgs("resend", args)
	if err != nil {
		return nil, err
	}
	rows := []ResendRow{}
	for _, id := range rooms {
		row := ResendRow{Room: id}
		res, err := d.sys.Root.RequestFuture(d.sys.RoomPID(id), &messages.ResendHeldRequest{}, askTimeout).Result()
		switch r, ok := res.(*messages.ResendHeldResult); {
		case err != nil || !ok:
			row.Error = "the room did not answer"
		case !r.Live:
			row.Error = "the room is still replaying its journal; try again"
		default:
			row.Released = r.Released
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// journal returns the last n journal events of a room, described without
// message bodies.
func (d *Daemon) journal(args []string) ([]string, error) {
	if len(args) < 1 || !slices.Contains(d.rooms, args[0]) {
		return nil, fmt.Errorf("usage: journal <allowed room ID> [n]")
	}
	n := 20
	if len(args) > 1 {
		v, err := strconv.Atoi(args[1])
		if err != nil || v < 1 || v > 1000 {
			return nil, fmt.Errorf("n must be 1..1000")
		}
		n = v
	}
	name := "app/rooms/" + args[0]
	var from uint64
	if _, idx, ok, err := d.store.LatestSnapshot(name); err != nil {
		return nil, err
	} else if ok {
		from = idx
	}
	var lines []string
	err := d.store.Events(name, from, 0, func(i uint64, ev proto.Message) error {
		lines = append(lines, fmt.Sprintf("%d %s", i, room.Describe(ev)))
		if len(lines) > n {
			lines = lines[1:]
		}
		return nil
	})
	return lines, err
}

func (d *Daemon) health() HealthReport {
	r, _, _ := d.healthWithin(context.Background())
	return r
}

// healthWithin is the health report, asking the rooms within ctx, with
// what they answered: each room's status (absent: no answer) and which
// rooms run. Rooms not asked before ctx ended are named in a reason.
func (d *Daemon) healthWithin(ctx context.Context) (HealthReport, map[string]*messages.RoomStatus, map[messages.RoomID]bool) {
	statuses := map[string]*messages.RoomStatus{}
	if err := d.store.Err(); err != nil {
		// The actors are stopping or gone: nothing else to ask.
		return HealthReport{Status: "failed", Build: &d.build, Reasons: []string{
			"the store could not sync to disk (" + err.Error() + "); Lisa sends nothing more and is stopping, to be restarted"}}, statuses, map[messages.RoomID]bool{}
	}
	r := HealthReport{Status: "healthy", Build: &d.build}
	now := time.Now()
	if cur, err := d.store.Cursor(); err != nil || cur.GetUpdatedAtMs() == 0 {
		r.Reasons = append(r.Reasons, "no successful sync yet")
	} else {
		age := now.Sub(time.UnixMilli(cur.GetUpdatedAtMs()))
		r.LastSyncAgeSeconds = age.Round(time.Second).Seconds()
		if age > d.syncAgeLimit {
			r.Reasons = append(r.Reasons, fmt.Sprintf("no successful sync for %s", age.Round(time.Second)))
		}
	}
	running := d.runningCtx(ctx)
	for _, up := range running {
		if up {
			r.RoomsRunning++
		} else {
			r.RoomsStopped++
		}
	}
	if r.RoomsStopped > 0 {
		r.Reasons = append(r.Reasons, fmt.Sprintf("%d room(s) stopped after repeated failures", r.RoomsStopped))
	}
	for i, id := range d.rooms {
		if _, ok := askWithin(ctx); !ok {
			r.Reasons = append(r.Reasons, fmt.Sprintf("%d of %d rooms were not asked for their status in time", len(d.rooms)-i, len(d.rooms)))
			break
		}
		st, ok := d.roomStatusCtx(ctx, id)
		if !ok {
			continue
		}
		statuses[id] = st
		for _, inv := range st.Invocations {
			if inv.Ready && inv.ReadyAtMs > 0 {
				r.OldestReadySeconds = max(r.OldestReadySeconds, now.Sub(time.UnixMilli(inv.ReadyAtMs)).Round(time.Second).Seconds())
			}
		}
		r.HeldReplies += len(st.Held)
	}
	if r.HeldReplies > 0 {
		r.Reasons = append(r.Reasons, fmt.Sprintf("%d reply(ies) held: the homeserver refused them (M_FORBIDDEN); "+
			"let Lisa post in the room (see held in lisa shell), then they are sent, or run resend", r.HeldReplies))
	}
	if r.OldestReadySeconds > readyAgeLimit.Seconds() {
		r.Reasons = append(r.Reasons, "a prepared reply has not been delivered for over "+readyAgeLimit.String())
	}
	if st, err := d.tools.Status(askTimeout); err == nil {
		r.ToolQueue = st.Queued
	}
	r = llmHealth(r, d.met, now)
	if d.meter != nil {
		if u, err := d.meter.Report("", 1); err == nil && u.Exhausted() {
			r.Reasons = append(r.Reasons, fmt.Sprintf("the daily token budget (llm.daily_token_budget = %d) is spent: no question is answered until the day ends", u.Budget))
		}
	}
	if len(r.Reasons) > 0 {
		r.Status = "degraded"
	}
	return r, statuses, running
}

// crashForTest makes a room actor panic; only with the admin-crash
// failpoint armed (crash tests of the debug shell).
type crashForTest struct{}

func crashOptions(armed bool) []actor.PropsOption {
	if !armed {
		return nil
	}
	return []actor.PropsOption{actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*crashForTest); ok {
				panic("crash requested through the admin socket (test failpoint)")
			}
			next(c, env)
		}
	})}
}

// llmHealth adds to r the LLM server's refusal of every request, which
// met keeps (nil: none): a reason, and the status degraded.
func llmHealth(r HealthReport, met *metrics.Metrics, now time.Time) HealthReport {
	if met == nil {
		return r
	}
	rf, ok := met.LLMRefusing()
	if !ok {
		return r
	}
	r.LLMRefusing = rf.Cause
	r.Reasons = append(r.Reasons, llmRefusalReason(rf, now))
	r.Status = "degraded"
	return r
}

// llmRefusalReason says in a health reason that the LLM server refuses
// every request: the cause, the HTTP status, for how long, and where the
// setting to check is named.
func llmRefusalReason(rf metrics.LLMRefusal, now time.Time) string {
	status := ""
	if rf.Status != 0 {
		status = fmt.Sprintf(", HTTP %d", rf.Status)
	}
	return fmt.Sprintf("the LLM server refuses every request (%s%s) for %s; the ERROR line %q names the setting to check",
		rf.Cause, status, now.Sub(rf.Since).Round(time.Second), llm.RefusedMessage)
}

// backup writes a consistent snapshot of the store to the new file
// args[0], an absolute path (lisa backup sends it; the shell may too).
func (d *Daemon) backup(args []string) (persistence.BackupInfo, error) {
	if len(args) != 1 || !filepath.IsAbs(args[0]) {
		return persistence.BackupInfo{}, errors.New("usage: backup /absolute/path/of/a/new/file")
	}
	info, err := d.store.BackupTo(args[0])
	if err != nil {
		d.log.Warn("backup failed", "path", args[0], "err", err.Error())
		return info, err
	}
	d.log.Info("backup written", "path", info.Path, "bytes", info.Bytes, "took_ms", info.Took.Milliseconds(), "sha256", info.SHA256)
	return info, nil
}
