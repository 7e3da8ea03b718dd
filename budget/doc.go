// Package budget counts the tokens Lisa's LLM requests use and enforces
// the daily token budgets (llm.daily_token_budget for the deployment,
// llm.room_daily_token_budget for each room).
//
// A [Meter] keeps today's totals (the day in the persona's time zone,
// read from an injected clock) over a durable ledger of one record per
// request (one per attempt that reached the server), written as the
// response or the failure arrives with the attempt it belongs to; records carry a unique ID, so nothing is counted twice and nothing
// a request used before a crash is lost. [Invoker] scopes an invocation's
// requests to its room, event and attempt and checks the budgets before
// the invocation starts; [LLM] checks them again before every request and
// records each response's usage, and the estimated prompt of each
// attempt that failed after it reached the server. When a budget is spent no request is
// sent: the room's first question of the day gets the budget notice
// (messages.CodeBudgetExhausted, answered with persona.budget_error), and
// later ones fail with messages.CodeRefusedBudget, which the room ends
// without a reply.
package budget
