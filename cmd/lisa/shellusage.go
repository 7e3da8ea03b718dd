package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/lisabot/lisa/daemon"
)

// printTokenUsage renders the answer of "usage": today's total against the
// deployment budget, then one line per room and day. Figures that
// include estimates (the server reported no usage) carry a "~".
func printTokenUsage(w io.Writer, data json.RawMessage) {
	var r daemon.UsageReport
	if err := json.Unmarshal(data, &r); err != nil {
		fmt.Fprintln(w, "unreadable answer:", err)
		return
	}
	est := func(n int64, estimated bool) string {
		if estimated {
			return "~" + strconv.FormatInt(n, 10)
		}
		return strconv.FormatInt(n, 10)
	}
	budget := "no daily budget"
	if r.DailyBudget > 0 {
		budget = fmt.Sprintf("of %d (%.0f%%), %d left", r.DailyBudget, 100*r.BudgetShare, r.Remaining)
		if r.Exhausted {
			budget += ": SPENT, questions are refused until the day ends"
		}
	}
	fmt.Fprintf(w, "today %s: %s tokens %s\n", r.Today, est(r.TodayTotal, r.TodayEstimated > 0), budget)
	roomBudget := "-"
	if r.RoomDailyBudget > 0 {
		roomBudget = strconv.FormatInt(r.RoomDailyBudget, 10)
	}
	fmt.Fprintf(w, "DAY\tROOM\tPROMPT\tCOMPLETION\tTOTAL\tREQUESTS\tREFUSED\tROOM BUDGET (%s)\n", roomBudget)
	estimated := false
	for _, row := range r.Rows {
		e := row.Estimated > 0
		estimated = estimated || e
		share := "-"
		if row.Day == r.Today && r.RoomDailyBudget > 0 {
			share = fmt.Sprintf("%.0f%%", 100*row.RoomBudgetShare)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", row.Day, row.Room, est(row.Prompt, e), est(row.Completion, e), est(row.Total, e), row.Requests, row.Refused, share)
	}
	if estimated || r.TodayEstimated > 0 {
		fmt.Fprintln(w, "~ includes estimates: the LLM server reported no usage for some requests; they are counted at 1 token per 3 bytes")
	}
}
