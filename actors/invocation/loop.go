package invocation

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lisabot/lisa/messages"
)

// run is the state of one invocation; nothing in it is shared between
// runs except the token estimator, which only learns.
type run struct {
	llm     LLM
	reg     *registry
	lim     Limits
	est     *TokenEstimator
	sources *sourceSet
	// fetched are the pages successful tool calls downloaded, in order:
	// the Sources the host lists when the answer cites nothing usable.
	fetched []string
	// system is the system prompt; intro, excerpt and tail make the first
	// user message (see contextIntro).
	system, intro, tail string
	excerpt             messages.Excerpt
	// turns are the messages after the first user message.
	turns   []turn
	calls   int // tool calls counted so far
	iters   int // LLM requests sent so far
	callIDs map[string]bool
	// reserved is why the run is on its reserved, tool-less request
	// (reasonMaxToolCalls or reasonMaxIterations), or "" before.
	reserved string
	flights  map[string]*flight // calls by tool and arguments (see execute)
}

// turn is one message after the first user message; a tool message keeps
// its result, so that it can be sent shorter when the window needs room.
type turn struct {
	msg     messages.ChatMessage
	result  *messages.ToolResult
	sources []string
}

// Run is the LLM tool loop of one invocation. It sends the system prompt
// and the labelled room context to llm, executes the tools a turn asks
// for side by side (Limits.MaxParallelToolCalls), giving back their
// results in the model's order, and validates the final JSON answer,
// asking for one repair if it is unusable.
//
// Every request is made to fit the model's window (Limits) first: the
// room excerpt's oldest events go first, tool output is shortened next;
// the system prompt and the invoking message always stay. A conversation
// that fits neither the window nor MaxRequestCharacters ends the run with
// messages.FallbackOverload.
//
// One request of MaxIterations is kept in reserve: once the model asks
// for more tool calls than MaxToolCalls leaves (those calls are not run),
// or the tool calls it asked for spend MaxToolCalls, or only the reserved
// request is left, that request is sent without tools (tool_choice
// "none") and asks the model to answer from what it has gathered, under
// the usual contract, repair rules and citation checks. Only if it gives
// no answer either does the run end with messages.FallbackOverload.
//
// The final answer is the first JSON object with a "markdown" string in
// the model's text (alone, fenced, or wrapped in prose). A reply without
// one is asked for again once (a repair request, in which no tool may be
// called). After that, a reply in plain prose is the answer, and so is a
// well-formed answer whose only fault is its citations: where web pages
// were fetched, the host lists them as the Sources. Only no answer at
// all (an empty or cut-off reply, a broken object) ends the run with
// messages.FallbackGeneric. A refusal is the answer as it is. None of
// these is an error. Errors are LLM failures, returned unchanged for the
// caller to classify, and the context's error when ctx ends between
// steps.
func Run(ctx context.Context, llm LLM, tools []Tool, p Prompt, lim Limits) (messages.Answer, error) {
	if llm == nil {
		return messages.Answer{}, &messages.Error{Code: messages.CodeInternal, Message: "no LLM configured", Permanent: true}
	}
	reg, err := newRegistry(tools)
	if err != nil {
		return messages.Answer{}, err
	}
	r := &run{
		llm:     llm,
		reg:     reg,
		lim:     lim.withDefaults(),
		est:     lim.Estimator,
		sources: newSourceSet(),
		callIDs: map[string]bool{},
		system:  SystemPrompt(p.Persona, reg.specs),
		intro:   contextIntro,
		tail:    contextTail(p.Facts),
		excerpt: p.excerpt(),
	}
	return r.loop(ctx)
}

func (r *run) loop(ctx context.Context) (messages.Answer, error) {
	repaired := false
	for {
		if r.iters >= r.lim.MaxIterations {
			return fallback(ctx, messages.FallbackOverload, r.budgetReason()), nil
		}
		msgs, ok := r.fit(ctx)
		if !ok {
			return fallback(ctx, messages.FallbackOverload, reasonWindow), nil
		}
		if requestChars(msgs, r.reg.specs) > r.lim.MaxRequestCharacters {
			return fallback(ctx, messages.FallbackOverload, reasonRequestSize), nil
		}
		if err := ctx.Err(); err != nil {
			return messages.Answer{}, err
		}
		if err := awaitDurable(ctx); err != nil {
			return messages.Answer{}, err
		}
		r.iters++
		// No tool may be called in a repair request, in the reserved one,
		// or in the last one: no request would be left to read results.
		answerOnly := repaired || r.reserved != "" || r.iters >= r.lim.MaxIterations
		req := messages.ChatRequest{Messages: msgs, Tools: slices.Clone(r.reg.specs), AnswerOnly: answerOnly && len(r.reg.specs) > 0, AnswerSchema: answerSchema}
		resp, err := r.llm.Chat(ctx, req)
		if err != nil {
			return messages.Answer{}, err
		}
		r.est.Observe(requestBytes(msgs, r.reg.specs), resp.Usage.PromptTokens, r.budget())
		attemptFrom(ctx).llmResponse(resp.Usage)

		if len(resp.ToolCalls) > 0 && !req.AnswerOnly {
			if resp.TextToolCalls {
				attemptFrom(ctx).textToolCalls(len(resp.ToolCalls))
			}
			// Calls beyond the budget are not run; the model answers
			// from what it has in the reserved request.
			if r.calls+len(resp.ToolCalls) > r.lim.MaxToolCalls {
				r.reserve(ctx, reasonMaxToolCalls)
				continue
			}
			if err := r.runTools(ctx, resp); err != nil {
				return messages.Answer{}, err
			}
			switch {
			case r.calls >= r.lim.MaxToolCalls:
				r.reserve(ctx, reasonMaxToolCalls)
			case r.iters+1 >= r.lim.MaxIterations:
				r.reserve(ctx, reasonMaxIterations)
			}
			continue
		}

		if resp.Refusal != "" && strings.TrimSpace(messages.StripReasoning(resp.Content)) == "" {
			return r.answer(ctx, resp.Refusal, nil, formRefusal), nil
		}
		fin := parseFinal(resp.Content, resp.FinishReason, r.lim.MaxResponseCharacters)
		last := repaired || r.iters >= r.lim.MaxIterations
		if fin.problem == "" {
			valid := r.sources.filter(fin.urls)
			problem := r.citationProblem(fin.urls, valid)
			switch {
			case problem == "":
				return r.answer(ctx, fin.markdown, valid, formJSON), nil
			case last:
				// Well formed, cites nothing usable: the host lists the
				// pages it fetched instead of refusing the answer.
				return r.answer(ctx, fin.markdown, nil, formHostSources), nil
			}
			fin.problem = problem
		} else if last {
			if fin.prose != "" {
				attemptFrom(ctx).finalNotJSON(ctx)
				return r.answer(ctx, fin.prose, nil, formProse), nil
			}
			if r.reserved != "" || (len(resp.ToolCalls) > 0 && !repaired) {
				// The reserved request brought no answer either, or the
				// last request was all the budget left and the model
				// still asked for tools.
				return fallback(ctx, messages.FallbackOverload, r.budgetReason()), nil
			}
			return fallback(ctx, messages.FallbackGeneric, reasonInvalidAnswer), nil
		}
		repaired = true
		// An empty reply is not sent back: a message with neither content
		// nor tool calls is refused (Ollama: 400 "invalid message content
		// type: <nil>"), and the repair message says it was empty.
		if said := messages.StripReasoning(resp.Content); strings.TrimSpace(said) != "" {
			r.turns = append(r.turns, turn{msg: messages.ChatMessage{Role: messages.RoleAssistant, Content: said}})
		}
		r.turns = append(r.turns, turn{msg: messages.ChatMessage{Role: messages.RoleUser, Content: repairMessage(fin.problem, r.lim.MaxResponseCharacters)}})
	}
}

// reserve turns the run to its reserved request, for reason: the next
// request offers no tool and asks the model to answer from what it has
// gathered. It is logged and counted with the attempt.
func (r *run) reserve(ctx context.Context, reason string) {
	if r.reserved != "" {
		return
	}
	r.reserved = reason
	attemptFrom(ctx).reservedRequest(ctx, reason, r.iters, r.calls)
	ask := reservedMessage(r.lim.MaxResponseCharacters)
	if len(r.turns) == 0 {
		// No tool ran (the first batch alone was over the budget): the
		// request goes on in the first user message, since some chat
		// templates refuse two user messages in a row.
		r.tail += "\n\n" + ask
		return
	}
	r.turns = append(r.turns, turn{msg: messages.ChatMessage{Role: messages.RoleUser, Content: ask}})
}

// budgetReason is why the run ran out of requests: the reason of its
// reserved request, or max_iterations.
func (r *run) budgetReason() string {
	if r.reserved != "" {
		return r.reserved
	}
	return reasonMaxIterations
}

// Forms of a final answer, logged with the attempt.
const (
	// formJSON: the answer contract, with valid citations.
	formJSON = "json"
	// formHostSources: the answer contract whose citations were unusable
	// even after the repair; the host lists the fetched pages.
	formHostSources = "json_host_sources"
	// formProse: plain prose after the repair (final_not_json); the host
	// lists the fetched pages.
	formProse = "prose"
	// formRefusal: the model's refusal, as it is.
	formRefusal = "refusal"
)

// answer returns a final answer in form: markdown with the cited valid
// URLs (formJSON), with the pages this run fetched as Sources
// (formHostSources, formProse), or with none (formRefusal).
func (r *run) answer(ctx context.Context, markdown string, cited []string, form string) messages.Answer {
	switch form {
	case formHostSources, formProse:
		cited = r.fetched
	case formRefusal:
		cited = nil
	}
	attemptFrom(ctx).answered(form, len(cited))
	ans := messages.Answer{Markdown: strings.TrimSpace(markdown), SourceURLs: slices.Clone(cited), ToolURLs: r.sources.urls()}
	for _, u := range ans.SourceURLs {
		if t := r.sources.title(u); t != "" {
			if ans.Titles == nil {
				ans.Titles = map[string]string{}
			}
			ans.Titles[u] = t
		}
	}
	return ans
}

// fallback records the fallback f of the attempt in ctx, and returns it
// as the answer.
func fallback(ctx context.Context, f messages.Fallback, reason string) messages.Answer {
	attemptFrom(ctx).fellBack(ctx, f, reason)
	return messages.Answer{Fallback: f}
}

// citationProblem enforces honest citations: if the model proposed
// sources and none came from this invocation's tool results, or if
// successful tool results with sources reached the model and nothing valid
// is cited, the answer is not published as is.
func (r *run) citationProblem(proposed, valid []string) string {
	switch {
	case len(valid) > 0:
		return ""
	case len(proposed) > 0:
		return "none of the source_urls came from this conversation's tool results; cite only URLs that a tool returned"
	case r.sources.len() > 0:
		return "web results were used, so source_urls must list at least one URL that a tool returned"
	}
	return ""
}

// runTools records the assistant's calls and appends one tool message per
// call that ran, in the calls' order; execute runs them side by side.
func (r *run) runTools(ctx context.Context, resp messages.ChatResponse) error {
	calls := slices.Clone(resp.ToolCalls)
	for i := range calls {
		for n := r.calls + i; calls[i].ID == "" || r.callIDs[calls[i].ID]; n++ {
			calls[i].ID = callID(n)
		}
		r.callIDs[calls[i].ID] = true
	}
	// Reasoning is not sent back: it is the model's, not the conversation's.
	r.turns = append(r.turns, turn{msg: messages.ChatMessage{Role: messages.RoleAssistant, Content: messages.StripReasoning(resp.Content), ToolCalls: calls}})
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, o := range r.execute(ctx, calls) {
		if !o.ran {
			continue // the invocation ended before it started
		}
		c, res := calls[i], o.res
		r.calls++
		name := c.Name
		if _, known := r.reg.tools[name]; !known {
			name = "(unknown)" // the model's text, never logged
		}
		if o.shared {
			attemptFrom(ctx).toolShared(ctx, name)
		}
		attemptFrom(ctx).toolResult(ctx, name, res)
		var sources []string
		if res.OK {
			sources = r.sources.add(res.SourceURLs)
			r.sources.addTitles(res.SourceTitles)
			for _, u := range r.sources.filter(res.Fetched) {
				if !slices.Contains(r.fetched, u) {
					r.fetched = append(r.fetched, u)
				}
			}
		}
		r.turns = append(r.turns, turn{msg: messages.ChatMessage{Role: messages.RoleTool, ToolCallID: c.ID}, result: &res, sources: sources})
	}
	return ctx.Err()
}

// callID is the ID Lisa gives the n-th tool call of a run that came
// without one (or with one already used): nine letters and digits, the
// form Mistral's API and templates require of every ID.
func callID(n int) string {
	s := strconv.Itoa(n)
	if len(s) > 5 {
		s = s[len(s)-5:]
	}
	return "lisa" + strings.Repeat("0", 5-len(s)) + s
}

// budget is the prompt tokens a request may take: the window less the
// answer's room.
func (r *run) budget() int {
	return r.lim.ContextWindowTokens - r.lim.MaxOutputTokens
}

// requestChars counts the characters of a request: every message's
// content, every tool call's ID, name and arguments, and the tool specs.
func requestChars(msgs []messages.ChatMessage, specs []messages.ToolSpec) int {
	n := 0
	for _, s := range specs {
		n += utf8.RuneCountInString(s.Name) + utf8.RuneCountInString(s.Description) + utf8.RuneCount(s.Parameters)
	}
	for _, m := range msgs {
		n += utf8.RuneCountInString(m.Content) + utf8.RuneCountInString(m.ToolCallID)
		for _, c := range m.ToolCalls {
			n += utf8.RuneCountInString(c.ID) + utf8.RuneCountInString(c.Name) + utf8.RuneCountInString(c.Arguments)
		}
	}
	return n
}

// answerSchema is the JSON schema of the final answer, sent as structured
// output where the server supports it and no tool may be called.
var answerSchema = messages.AnswerSchema()
