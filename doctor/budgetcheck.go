package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lisabot/lisa/adapters/admin"
	"github.com/lisabot/lisa/daemon"
)

// checkBudget prints today's token usage against llm.daily_token_budget
// and llm.room_daily_token_budget, read from the running Lisa's admin
// socket (her store is hers while she runs). A spent deployment budget
// is a warning: no question is answered until the day ends. Without a
// budget and without a running Lisa it has nothing to say (no line).
func checkBudget(_ context.Context, e *Env) []Result {
	c := e.Res.Config.LLM
	budgets := "no daily token budget"
	if c.DailyTokenBudget > 0 || c.RoomDailyTokenBudget > 0 {
		budgets = fmt.Sprintf("daily token budget %s, per room %s", orNone(c.DailyTokenBudget), orNone(c.RoomDailyTokenBudget))
	}
	sock := e.Res.Config.Runtime.AdminSocket
	if !admin.Serving(sock) {
		if c.DailyTokenBudget <= 0 && c.RoomDailyTokenBudget <= 0 {
			return nil // no budget, and no usage to read: nothing to say
		}
		return []Result{{Status: OK, Message: budgets + "; today's usage is not known: no Lisa is serving " + sock}}
	}
	cl, err := admin.Dial(sock, 2*time.Second)
	if err != nil {
		return []Result{{Status: Warning, Message: budgets + "; today's usage could not be read: " + err.Error()}}
	}
	defer cl.Close()
	data, err := cl.Call("usage")
	var rep daemon.UsageReport
	if err == nil {
		err = json.Unmarshal(data, &rep)
	}
	if err != nil {
		return []Result{{Status: Warning, Message: budgets + "; today's usage could not be read: " + err.Error()}}
	}
	msg := fmt.Sprintf("%s; today (%s) %d tokens", budgets, rep.Today, rep.TodayTotal)
	if rep.TodayEstimated > 0 {
		msg += fmt.Sprintf(" (%d requests estimated)", rep.TodayEstimated)
	}
	if rep.DailyBudget > 0 {
		msg += fmt.Sprintf(", %.0f%% of the daily budget, %d left", 100*rep.BudgetShare, rep.Remaining)
	}
	var top int64
	for _, r := range rep.Rows {
		top = max(top, r.Total)
	}
	if rep.RoomDailyBudget > 0 && len(rep.Rows) > 0 {
		msg += fmt.Sprintf("; the busiest room used %d of its %d", top, rep.RoomDailyBudget)
	}
	if rep.Exhausted {
		return []Result{{Status: Warning, Message: msg + ": the daily budget is spent, no question is answered until the day ends",
			Fix: "wait for the day to end, or raise llm.daily_token_budget and restart Lisa"}}
	}
	return []Result{{Status: OK, Message: msg}}
}

func orNone(n int) string {
	if n <= 0 {
		return "none"
	}
	return fmt.Sprint(n)
}
