package invocation

import (
	"context"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/lisabot/lisa/messages"
)

// run is the state of one invocation; nothing in it is shared between
// runs.
type run struct {
	llm       LLM
	reg       *registry
	lim       Limits
	sources   *sourceSet
	msgs      []messages.ChatMessage
	specChars int
	calls     int // tool calls counted so far
	iters     int // LLM requests sent so far
	callIDs   map[string]bool
}

// Run is the LLM tool loop of one invocation. It sends the system prompt
// and the labelled room context to llm, executes requested tools
// sequentially in the model's order, and validates the final JSON answer,
// asking for one repair if it is unusable.
//
// Exhausting MaxIterations or MaxToolCalls, or a conversation that no
// longer fits MaxRequestCharacters, ends the run with
// messages.FallbackOverload; an answer still unusable after the repair (or
// with no iteration left for one) ends it with messages.FallbackGeneric.
// Neither is an error. Errors are LLM failures, returned unchanged for the
// caller to classify, and the context's error when ctx ends between steps.
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
		sources: newSourceSet(),
		callIDs: map[string]bool{},
		msgs: []messages.ChatMessage{
			{Role: messages.RoleSystem, Content: SystemPrompt(p.Persona, reg.specs)},
			{Role: messages.RoleUser, Content: contextMessage(p.ContextBlock, p.Facts)},
		},
	}
	for _, s := range reg.specs {
		r.specChars += utf8.RuneCountInString(s.Name) + utf8.RuneCountInString(s.Description) + utf8.RuneCount(s.Parameters)
	}
	return r.loop(ctx)
}

func (r *run) loop(ctx context.Context) (messages.Answer, error) {
	repaired := false
	for {
		if r.iters >= r.lim.MaxIterations {
			return fallback(ctx, messages.FallbackOverload, reasonMaxIterations), nil
		}
		if r.requestChars() > r.lim.MaxRequestCharacters {
			return fallback(ctx, messages.FallbackOverload, reasonRequestSize), nil
		}
		if err := ctx.Err(); err != nil {
			return messages.Answer{}, err
		}
		if err := awaitDurable(ctx); err != nil {
			return messages.Answer{}, err
		}
		r.iters++
		resp, err := r.llm.Chat(ctx, messages.ChatRequest{Messages: slices.Clone(r.msgs), Tools: slices.Clone(r.reg.specs)})
		if err != nil {
			return messages.Answer{}, err
		}
		attemptFrom(ctx).llmResponse(resp.Usage)

		if len(resp.ToolCalls) > 0 {
			// No request would be left to use the results: don't run them.
			if r.iters >= r.lim.MaxIterations {
				return fallback(ctx, messages.FallbackOverload, reasonMaxIterations), nil
			}
			if r.calls+len(resp.ToolCalls) > r.lim.MaxToolCalls {
				return fallback(ctx, messages.FallbackOverload, reasonMaxToolCalls), nil
			}
			if err := r.runTools(ctx, resp); err != nil {
				return messages.Answer{}, err
			}
			continue
		}

		md, proposed, problem := parseFinal(resp.Content, r.lim.MaxResponseCharacters)
		var valid []string
		if problem == "" {
			valid = r.sources.filter(proposed)
			problem = r.citationProblem(proposed, valid)
		}
		if problem == "" {
			ans := messages.Answer{Markdown: md, SourceURLs: valid}
			for _, u := range valid {
				if t := r.sources.title(u); t != "" {
					if ans.Titles == nil {
						ans.Titles = map[string]string{}
					}
					ans.Titles[u] = t
				}
			}
			return ans, nil
		}
		if repaired || r.iters >= r.lim.MaxIterations {
			return fallback(ctx, messages.FallbackGeneric, reasonInvalidAnswer), nil
		}
		repaired = true
		r.msgs = append(r.msgs,
			messages.ChatMessage{Role: messages.RoleAssistant, Content: messages.StripReasoning(resp.Content)},
			messages.ChatMessage{Role: messages.RoleUser, Content: repairMessage(problem, r.lim.MaxResponseCharacters)})
	}
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

// runTools records the assistant's calls and appends one bounded tool
// message per call, executing the calls one after another.
func (r *run) runTools(ctx context.Context, resp messages.ChatResponse) error {
	calls := slices.Clone(resp.ToolCalls)
	for i := range calls {
		for n := r.calls + i; calls[i].ID == "" || r.callIDs[calls[i].ID]; n++ {
			calls[i].ID = "call_lisa_" + strconv.Itoa(n)
		}
		r.callIDs[calls[i].ID] = true
	}
	// Reasoning is not sent back: it is the model's, not the conversation's.
	r.msgs = append(r.msgs, messages.ChatMessage{Role: messages.RoleAssistant, Content: messages.StripReasoning(resp.Content), ToolCalls: calls})
	for _, c := range calls {
		if err := ctx.Err(); err != nil {
			return err
		}
		r.calls++
		res := r.reg.call(ctx, c)
		name := c.Name
		if _, known := r.reg.tools[name]; !known {
			name = "(unknown)" // the model's text, never logged
		}
		attemptFrom(ctx).toolResult(ctx, name, res)
		var sources []string
		if res.OK {
			sources = r.sources.add(res.SourceURLs)
			r.sources.addTitles(res.SourceTitles)
		}
		r.msgs = append(r.msgs, messages.ChatMessage{
			Role:       messages.RoleTool,
			ToolCallID: c.ID,
			Content:    encodeResult(res, sources, r.lim.MaxToolOutputCharacters),
		})
	}
	return nil
}

// requestChars counts the characters the next request would carry.
func (r *run) requestChars() int {
	n := r.specChars
	for _, m := range r.msgs {
		n += utf8.RuneCountInString(m.Content) + utf8.RuneCountInString(m.ToolCallID)
		for _, c := range m.ToolCalls {
			n += utf8.RuneCountInString(c.ID) + utf8.RuneCountInString(c.Name) + utf8.RuneCountInString(c.Arguments)
		}
	}
	return n
}
