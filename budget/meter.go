package budget

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/persistence"
)

// Ledger is the durable store of usage records and budget notices
// (persistence.Badger).
type Ledger interface {
	RecordUsage(rec persistence.UsageRecord) error
	Usage(day string, fn func(persistence.UsageRecord) error) error
	BudgetNotice(day, room, eventID string) (bool, error)
}

// Config configures a [Meter].
type Config struct {
	// Ledger stores the records.
	Ledger Ledger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Location is the persona's time zone, which says where a day ends;
	// nil is UTC.
	Location *time.Location
	// Daily is llm.daily_token_budget, RoomDaily
	// llm.room_daily_token_budget; 0 is no limit.
	Daily, RoomDaily int64
	// OnTokens, if set, is told of every request's tokens (metrics).
	OnTokens func(prompt, completion int64)
	// Logger receives refusals and ledger failures; nil discards.
	Logger *slog.Logger
}

// Totals are the tokens of a room or the deployment on one day.
type Totals struct {
	Prompt, Completion int64
	// Requests counts the LLM requests; Estimated those whose counts were
	// estimated from bytes.
	Requests, Estimated int64
}

// Sum is the tokens in all.
func (t Totals) Sum() int64 { return t.Prompt + t.Completion }

func (t *Totals) add(r persistence.UsageRecord) {
	t.Prompt += r.PromptTokens
	t.Completion += r.CompletionTokens
	t.Requests++
	if r.Estimated {
		t.Estimated++
	}
}

// Meter counts usage and decides whether a request may be sent. It is
// safe for concurrent use.
type Meter struct {
	cfg    Config
	prefix string
	seq    atomic.Uint64

	mu      sync.Mutex
	day     string
	loaded  bool
	rooms   map[string]*Totals
	all     Totals
	refused map[string]int64 // room → questions refused today
}

// New returns a meter over cfg.
func New(cfg Config) *Meter {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Meter{cfg: cfg, prefix: hex.EncodeToString(b[:]) + fmt.Sprintf("%x", cfg.Now().UnixMilli()),
		rooms: map[string]*Totals{}, refused: map[string]int64{}}
}

// Day is the day of t in the meter's time zone (YYYY-MM-DD).
func (m *Meter) Day(t time.Time) string { return t.In(m.cfg.Location).Format(time.DateOnly) }

// Limited reports whether any budget is set.
func (m *Meter) Limited() bool { return m.cfg.Daily > 0 || m.cfg.RoomDaily > 0 }

// today moves the totals to the current day, loading them from the
// ledger the first time; m.mu is held.
func (m *Meter) today() (string, error) {
	day := m.Day(m.cfg.Now())
	if day == m.day && m.loaded {
		return day, nil
	}
	rooms, all := map[string]*Totals{}, Totals{}
	err := m.cfg.Ledger.Usage(day, func(r persistence.UsageRecord) error {
		t := rooms[r.Room]
		if t == nil {
			t = &Totals{}
			rooms[r.Room] = t
		}
		t.add(r)
		all.add(r)
		return nil
	})
	if err != nil {
		return "", err
	}
	if day != m.day {
		m.refused = map[string]int64{}
	}
	m.day, m.loaded, m.rooms, m.all = day, true, rooms, all
	return day, nil
}

// Check decides whether a request of room for eventID may be sent now:
// yes (nil) while the room's and the deployment's tokens today are below
// their budgets. A request under way is not stopped, so a budget is
// overrun by at most the requests running when it was reached (see
// docs/operations.md). On no it returns a *messages.Error:
// CodeBudgetExhausted for the room's one notice of the day (given again
// to the same event, so a repeated attempt answers alike),
// CodeRefusedBudget afterwards.
func (m *Meter) Check(ctx context.Context, room, eventID string) error {
	m.mu.Lock()
	day, err := m.today()
	if err != nil {
		m.mu.Unlock()
		return &messages.Error{Code: messages.CodeStorage, Message: "usage ledger not readable", Err: err}
	}
	roomUsed := int64(0)
	if t := m.rooms[room]; t != nil {
		roomUsed = t.Sum()
	}
	over := ""
	switch {
	case m.cfg.RoomDaily > 0 && roomUsed >= m.cfg.RoomDaily:
		over = "room"
	case m.cfg.Daily > 0 && m.all.Sum() >= m.cfg.Daily:
		over = "deployment"
	}
	if over == "" {
		m.mu.Unlock()
		return nil
	}
	m.mu.Unlock()
	mine, err := m.cfg.Ledger.BudgetNotice(day, room, eventID)
	if err != nil {
		return &messages.Error{Code: messages.CodeStorage, Message: "budget notice not recorded", Err: err}
	}
	if mine {
		m.cfg.Logger.WarnContext(ctx, "token budget spent: the question gets the budget notice, later ones today are refused",
			"room", messages.RoomID(room), "event", messages.EventID(eventID), "budget", over, "day", day)
		return &messages.Error{Code: messages.CodeBudgetExhausted, Message: over + " token budget spent", Permanent: true}
	}
	m.mu.Lock()
	if m.day == day {
		m.refused[room]++
	}
	m.mu.Unlock()
	m.cfg.Logger.InfoContext(ctx, "question refused: the token budget is spent and the room had its notice today",
		"room", messages.RoomID(room), "event", messages.EventID(eventID), "budget", over, "day", day, "code", messages.CodeRefusedBudget)
	return &messages.Error{Code: messages.CodeRefusedBudget, Message: over + " token budget spent", Permanent: true}
}

// Record stores the usage of one request made for (room, eventID,
// attempt) as it comes back, and adds it to today's totals. A record
// that cannot be stored is still counted in memory and logged.
func (m *Meter) Record(ctx context.Context, room, eventID string, attempt uint32, prompt, completion int64, estimated bool) {
	now := m.cfg.Now()
	rec := persistence.UsageRecord{
		Day: m.Day(now), Room: room, ID: fmt.Sprintf("%s-%08x", m.prefix, m.seq.Add(1)),
		Event: eventID, Attempt: attempt, PromptTokens: prompt, CompletionTokens: completion, Estimated: estimated, AtMs: now.UnixMilli(),
	}
	if m.cfg.OnTokens != nil {
		m.cfg.OnTokens(prompt, completion)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// The totals are brought to the record's day before it is stored, so
	// that loading them from the ledger cannot count it as well.
	_, loadErr := m.today()
	if err := m.cfg.Ledger.RecordUsage(rec); err != nil {
		m.cfg.Logger.ErrorContext(ctx, "usage not recorded", "room", messages.RoomID(room), "code", messages.CodeStorage, "error", err)
	}
	if loadErr != nil || m.day != rec.Day {
		return
	}
	t := m.rooms[room]
	if t == nil {
		t = &Totals{}
		m.rooms[room] = t
	}
	t.add(rec)
	m.all.add(rec)
}

// RoomDay is one room's usage on one day.
type RoomDay struct {
	Day, Room string
	Totals
	// Refused counts the questions refused today since the start
	// (today only; not kept across restarts).
	Refused int64
}

// Report is usage over some days with today's share of the budgets.
type Report struct {
	// Today is today's day; Budget and RoomBudget the limits (0: none).
	Today              string
	Budget, RoomBudget int64
	// Deployment is today's total.
	Deployment Totals
	// Rows are per room and day, newest day first, then by room.
	Rows []RoomDay
}

// Remaining is the deployment budget left today; -1 when none is set.
func (r Report) Remaining() int64 {
	if r.Budget <= 0 {
		return -1
	}
	return max(0, r.Budget-r.Deployment.Sum())
}

// Exhausted reports whether the deployment budget is spent.
func (r Report) Exhausted() bool { return r.Budget > 0 && r.Deployment.Sum() >= r.Budget }

// Report reads the usage of the last days days (today included), for
// room only when room is not empty.
func (m *Meter) Report(room string, days int) (Report, error) {
	if days < 1 {
		days = 1
	}
	now := m.cfg.Now().In(m.cfg.Location)
	rep := Report{Today: m.Day(now), Budget: m.cfg.Daily, RoomBudget: m.cfg.RoomDaily}
	m.mu.Lock()
	refused := map[string]int64{}
	if m.day == rep.Today {
		for k, v := range m.refused {
			refused[k] = v
		}
	}
	m.mu.Unlock()
	for i := range days {
		// Noon keeps a day with a DST change from being skipped.
		d := time.Date(now.Year(), now.Month(), now.Day()-i, 12, 0, 0, 0, m.cfg.Location)
		day := d.Format(time.DateOnly)
		rows := map[string]*RoomDay{}
		err := m.cfg.Ledger.Usage(day, func(r persistence.UsageRecord) error {
			if i == 0 {
				rep.Deployment.add(r)
			}
			if room != "" && r.Room != room {
				return nil
			}
			rd := rows[r.Room]
			if rd == nil {
				rd = &RoomDay{Day: day, Room: r.Room}
				rows[r.Room] = rd
			}
			rd.add(r)
			return nil
		})
		if err != nil {
			return Report{}, err
		}
		if i == 0 {
			for r, n := range refused {
				if room != "" && r != room {
					continue
				}
				if rows[r] == nil {
					rows[r] = &RoomDay{Day: day, Room: r}
				}
				rows[r].Refused = n
			}
		}
		keys := make([]string, 0, len(rows))
		for k := range rows {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			rep.Rows = append(rep.Rows, *rows[k])
		}
	}
	return rep, nil
}
