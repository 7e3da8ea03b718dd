package daemon

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/lisabot/lisa/adapters/admin"
	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/messages"
)

// Lisa cannot read an end-to-end encrypted room (she has no keys). An
// allowed room that is encrypted is therefore an operator's problem: it is
// logged at error level and reported by `lisa health` (degraded, exit 1),
// and Lisa goes on serving the other rooms.

// The start-up check of the allowed rooms is bounded: so many requests at
// a time, each and all of them within a time limit.
const (
	encryptionCheckWorkers = 8
	encryptionCheckPerRoom = 15 * time.Second
	encryptionCheckTotal   = 2 * time.Minute
)

// encryptionLimits bound one check of the allowed rooms.
type encryptionLimits struct {
	Workers int           // requests at a time
	PerRoom time.Duration // one room's check, retries included
	Total   time.Duration // the whole check
}

// encryptionChecker is what the check asks: *matrix.Client.
type encryptionChecker interface {
	RoomEncrypted(ctx context.Context, room string) (bool, error)
}

// encryptedRooms are the allowed rooms known to be encrypted. Encryption
// cannot be turned off again, so a room is never removed.
type encryptedRooms struct {
	log   *slog.Logger
	mu    sync.Mutex
	rooms map[string]bool
}

func newEncryptedRooms(log *slog.Logger) *encryptedRooms {
	return &encryptedRooms{log: log, rooms: map[string]bool{}}
}

// Mark records room as encrypted; the first time, it logs the operator's
// error line naming the room as configured. foundBy says how it was found
// ("start-up check", or "sync" once the sync reports rooms becoming
// encrypted while Lisa runs).
func (e *encryptedRooms) Mark(room, foundBy string) {
	e.mu.Lock()
	known := e.rooms[room]
	e.rooms[room] = true
	e.mu.Unlock()
	if !known {
		e.log.Error(matrix.EncryptedRoomProblem(room), "room", messages.RoomID(room),
			"code", "matrix_room_encrypted", "found_by", foundBy)
	}
}

// list returns the encrypted rooms, sorted.
func (e *encryptedRooms) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, 0, len(e.rooms))
	for room := range e.rooms {
		out = append(out, room)
	}
	slices.Sort(out)
	return out
}

// report adds the encrypted rooms to a health report: each is a reason,
// and any makes Lisa degraded.
func (e *encryptedRooms) report(r HealthReport) HealthReport {
	rooms := e.list()
	if len(rooms) == 0 {
		return r
	}
	r.EncryptedRooms = rooms
	for _, room := range rooms {
		r.Reasons = append(r.Reasons, matrix.EncryptedRoomProblem(room))
	}
	r.Status = "degraded"
	return r
}

// middleware makes the admin socket's "health" answer report the
// encrypted rooms; every other command goes to next unchanged.
func (e *encryptedRooms) middleware(next admin.Handler) admin.Handler {
	return admin.HandlerFunc(func(ctx context.Context, cmd string, args []string) (any, error) {
		v, err := next.Handle(ctx, cmd, args)
		if r, ok := v.(HealthReport); ok && err == nil && cmd == "health" {
			return e.report(r), nil
		}
		return v, err
	})
}

// encryptionSummary counts the outcomes of one check.
type encryptionSummary struct {
	Plain, Encrypted, Failed, Unchecked int
}

// check asks, lim.Workers at a time, whether each room is encrypted, and
// marks those that are. A room whose check fails is logged at warn level
// and skipped; rooms left when lim.Total is spent (or ctx ends) count as
// unchecked.
func (e *encryptedRooms) check(ctx context.Context, c encryptionChecker, rooms []string, lim encryptionLimits) encryptionSummary {
	budget, cancel := context.WithTimeout(ctx, lim.Total)
	defer cancel()
	jobs := make(chan string)
	var mu sync.Mutex
	var sum encryptionSummary
	var wg sync.WaitGroup
	for range max(1, min(lim.Workers, len(rooms))) {
		wg.Go(func() {
			for room := range jobs {
				outcome := e.checkRoom(budget, c, room, lim.PerRoom)
				mu.Lock()
				outcome(&sum)
				mu.Unlock()
			}
		})
	}
	sent := 0
feed:
	for _, room := range rooms {
		select {
		case jobs <- room:
			sent++
		case <-budget.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	sum.Unchecked += len(rooms) - sent
	e.logSummary(ctx, sum, lim.Total)
	return sum
}

// checkRoom checks one room within perRoom and returns how to count it.
func (e *encryptedRooms) checkRoom(budget context.Context, c encryptionChecker, room string, perRoom time.Duration) func(*encryptionSummary) {
	ctx, cancel := context.WithTimeout(budget, perRoom)
	defer cancel()
	enc, err := c.RoomEncrypted(ctx, room)
	switch {
	case err == nil && enc:
		e.Mark(room, "start-up check")
		return func(s *encryptionSummary) { s.Encrypted++ }
	case err == nil:
		return func(s *encryptionSummary) { s.Plain++ }
	case budget.Err() != nil:
		return func(s *encryptionSummary) { s.Unchecked++ }
	}
	code := messages.CodeInternal
	var le *messages.Error
	if errors.As(err, &le) {
		code = le.Code
	}
	e.log.Warn("could not check whether an allowed room is encrypted; Lisa serves it anyway",
		"room", messages.RoomID(room), "code", code, "err", err.Error())
	return func(s *encryptionSummary) { s.Failed++ }
}

// logSummary logs the outcome of a check; one that ran out of time says
// so. A check cut short because Lisa is stopping says nothing more.
func (e *encryptedRooms) logSummary(ctx context.Context, sum encryptionSummary, limit time.Duration) {
	if ctx.Err() != nil {
		return
	}
	if sum.Unchecked > 0 {
		e.log.Warn("the encryption check of the allowed rooms ran out of time; the rest were not checked",
			"unchecked", sum.Unchecked, "limit", limit.String())
	}
	e.log.Info("allowed rooms checked for encryption", "encrypted", sum.Encrypted, "plain", sum.Plain,
		"failed", sum.Failed, "unchecked", sum.Unchecked)
}

// watchEncryption makes d's `lisa health` report encrypted allowed rooms
// and checks every allowed room once, in the background, so that start-up
// is not delayed. The returned function waits for the check to end; it
// ends soon after ctx does.
func watchEncryption(ctx context.Context, d *Daemon, enc *encryptedRooms, c encryptionChecker, rooms []string) (wait func()) {
	d.admin.Wrap(enc.middleware)
	done := make(chan struct{})
	go func() {
		defer close(done)
		enc.check(ctx, c, rooms, encryptionLimits{Workers: encryptionCheckWorkers,
			PerRoom: encryptionCheckPerRoom, Total: encryptionCheckTotal})
	}()
	return func() { <-done }
}
