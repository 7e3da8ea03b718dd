package daemon

import (
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/lisabot/lisa/adapters/metrics"
	"github.com/lisabot/lisa/budget"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/persistence"
)

// newMeter returns the token meter of cfg over the store: budgets from
// llm.daily_token_budget and llm.room_daily_token_budget, days in
// persona.time_zone, tokens counted in met.
func newMeter(cfg config.Config, store *persistence.Badger, clock func() time.Time, met *metrics.Metrics, log *slog.Logger) *budget.Meter {
	return budget.New(budget.Config{
		Ledger: store, Now: clock, Location: personaLocation(cfg.Persona.TimeZone, log),
		Daily: int64(cfg.LLM.DailyTokenBudget), RoomDaily: int64(cfg.LLM.RoomDailyTokenBudget),
		OnTokens: met.LLMTokens, Logger: log,
	})
}

// UsageRow is one line of "usage": a room's tokens on one day.
type UsageRow struct {
	Day        string `json:"day"`
	Room       string `json:"room"`
	Prompt     int64  `json:"prompt_tokens"`
	Completion int64  `json:"completion_tokens"`
	Total      int64  `json:"total_tokens"`
	Requests   int64  `json:"requests"`
	// Estimated counts the requests whose tokens were estimated from
	// bytes (the server reported none, or the request failed after it
	// reached the server); their figures are in the sums.
	Estimated int64 `json:"estimated_requests,omitempty"`
	// Refused counts today's questions refused for budget since Lisa
	// started.
	Refused int64 `json:"refused,omitempty"`
	// RoomBudgetShare is Total over llm.room_daily_token_budget (today's
	// rows only, when one is set).
	RoomBudgetShare float64 `json:"room_budget_share,omitempty"`
}

// UsageReport is the answer of "usage".
type UsageReport struct {
	Today string `json:"today"`
	// DailyBudget and RoomDailyBudget are the budgets (0: none).
	DailyBudget     int64 `json:"daily_token_budget"`
	RoomDailyBudget int64 `json:"room_daily_token_budget"`
	// TodayTotal is the deployment's tokens today; BudgetShare their share
	// of DailyBudget (when set); Remaining what is left of it (-1: none).
	TodayTotal     int64      `json:"today_total_tokens"`
	TodayEstimated int64      `json:"today_estimated_requests,omitempty"`
	BudgetShare    float64    `json:"budget_share,omitempty"`
	Remaining      int64      `json:"remaining_tokens"`
	Exhausted      bool       `json:"exhausted"`
	Rows           []UsageRow `json:"rows"`
}

// usage answers "usage [room] [days]".
func (d *Daemon) usage(args []string) (UsageReport, error) {
	room, days := "", 1
	for _, a := range args {
		if n, err := strconv.Atoi(a); err == nil {
			if n < 1 || n > 366 {
				return UsageReport{}, fmt.Errorf("days must be 1 to 366")
			}
			days = n
			continue
		}
		room = a
	}
	return UsageOf(d.meter, room, days)
}

// UsageOf reads m's report for room (all rooms when empty) over the last
// days days.
func UsageOf(m *budget.Meter, room string, days int) (UsageReport, error) {
	rep, err := m.Report(room, days)
	if err != nil {
		return UsageReport{}, err
	}
	out := UsageReport{Today: rep.Today, DailyBudget: rep.Budget, RoomDailyBudget: rep.RoomBudget,
		TodayTotal: rep.Deployment.Sum(), TodayEstimated: rep.Deployment.Estimated, Remaining: rep.Remaining(), Exhausted: rep.Exhausted(),
		Rows: []UsageRow{}}
	if rep.Budget > 0 {
		out.BudgetShare = float64(rep.Deployment.Sum()) / float64(rep.Budget)
	}
	for _, r := range rep.Rows {
		row := UsageRow{Day: r.Day, Room: r.Room, Prompt: r.Prompt, Completion: r.Completion, Total: r.Sum(),
			Requests: r.Requests, Estimated: r.Estimated, Refused: r.Refused}
		if r.Day == rep.Today && rep.RoomBudget > 0 {
			row.RoomBudgetShare = float64(r.Sum()) / float64(rep.RoomBudget)
		}
		out.Rows = append(out.Rows, row)
	}
	return out, nil
}
