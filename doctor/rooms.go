package doctor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lisabot/lisa/adapters/matrix"
)

// roomWorkers is how many rooms are checked at a time.
const roomWorkers = 4

// roomsSection: each allowed room is joined, not encrypted, and Lisa's
// power level lets her send (and react and take her reaction back).
func roomsSection() Section {
	return Section{Name: "rooms", Checks: []Check{{
		Name: "rooms",
		// Whoami and the list of joined rooms, then each room's state
		// (three requests) roomWorkers at a time.
		Timeout: func(e *Env) time.Duration {
			n := len(e.Res.Config.Matrix.AllowedRoomIDs)
			return e.RequestTimeout * time.Duration(3+3*((n+roomWorkers-1)/roomWorkers))
		},
		Run: checkRooms,
	}}}
}

func checkRooms(ctx context.Context, e *Env) []Result {
	m := e.Res.Config.Matrix
	user, _, err := e.Whoami()
	switch {
	case errors.Is(err, errHomeserverDown):
		return []Result{{Status: Skipped, Message: "rooms not checked: " + err.Error()}}
	case err != nil:
		return []Result{{Status: Skipped, Message: "rooms not checked: whoami failed (see the homeserver section)"}}
	case user != m.UserID:
		return []Result{{Status: Skipped, Message: "rooms not checked: the access token is not Lisa's (see the homeserver section)"}}
	}
	joined, err := e.JoinedRooms()
	if err != nil {
		return []Result{unreachable(e, "the homeserver", "GET /joined_rooms", err, "matrix.homeserver_url")}
	}
	out := make([]Result, len(m.AllowedRoomIDs))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(roomWorkers, len(m.AllowedRoomIDs)) {
		wg.Go(func() {
			for i := range jobs {
				out[i] = checkRoom(ctx, e, m.AllowedRoomIDs[i], slices.Contains(joined, m.AllowedRoomIDs[i]))
			}
		})
	}
	for i := range m.AllowedRoomIDs {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return out
}

// checkRoom checks one allowed room.
func checkRoom(ctx context.Context, e *Env, room string, joined bool) Result {
	m := e.Res.Config.Matrix
	if !joined {
		return Result{Status: Failed, Message: fmt.Sprintf("%s: Lisa (%s) is not a member of this room", room, m.UserID),
			Fix: "join it once with her account from a Matrix client (she does not accept invitations), or remove it from matrix.allowed_room_ids"}
	}
	ask := func(f func(ctx context.Context) error) error {
		rctx, cancel := context.WithTimeout(ctx, e.RequestTimeout)
		defer cancel()
		return f(rctx)
	}
	var enc bool
	err := ask(func(ctx context.Context) (err error) { enc, err = e.Matrix().IsEncrypted(ctx, room); return })
	if err != nil {
		return roomUnreadable(e, room, "its encryption state", err)
	}
	if enc {
		return Result{Status: Failed, Message: matrix.EncryptedRoomProblem(room),
			Fix: "Lisa has no end-to-end encryption and encryption cannot be turned off: use an unencrypted room in matrix.allowed_room_ids"}
	}
	var p matrix.Powers
	err = ask(func(ctx context.Context) (err error) { p, err = e.Matrix().Powers(ctx, room); return })
	if err != nil {
		return roomUnreadable(e, room, "its power levels", err)
	}
	level := fmt.Sprint(p.User)
	if p.Creator {
		level = "creator"
	}
	if !p.Can(p.Message) {
		return Result{Status: Failed, Message: fmt.Sprintf("%s: Lisa's power level %s is below the %d needed to send messages", room, level, p.Message),
			Fix: fmt.Sprintf("raise her power level in the room to %d, or lower the level of m.room.message", p.Message)}
	}
	var short []string
	reaction := e.Res.Config.Runtime.WaitReaction
	if reaction != "" && !p.Can(p.Reaction) {
		short = append(short, fmt.Sprintf("%d to react (%s on a waiting question)", p.Reaction, reaction))
	}
	if !p.Can(p.Redaction) {
		short = append(short, fmt.Sprintf("%d to redact her own events (taking a reaction back)", p.Redaction))
	}
	if len(short) > 0 {
		fix := "raise her power level in the room"
		if reaction != "" {
			fix += `, or set runtime.wait_reaction = "" to do without reactions`
		}
		return Result{Status: Warning, Message: fmt.Sprintf("%s: Lisa's power level %s can send, but is below %s", room, level, strings.Join(short, " and ")),
			Fix: fix}
	}
	return Result{Status: OK, Message: fmt.Sprintf("%s: joined, not encrypted, power level %s (sending needs %d, redacting %d)", room, level, p.Message, p.Redaction)}
}

// roomUnreadable is the line for a room whose state could not be read.
func roomUnreadable(e *Env, room, what string, err error) Result {
	var pe *matrix.ProbeError
	if errors.As(err, &pe) && pe.Timeout {
		return Result{Status: Failed, Message: fmt.Sprintf("%s: the homeserver did not give %s within %s", room, what, e.RequestTimeout)}
	}
	return Result{Status: Failed, Message: fmt.Sprintf("%s: cannot read %s: %v", room, what, err)}
}
