package llm

import (
	"context"
	"errors"
	"net/url"

	openai "github.com/sashabaranov/go-openai"

	"github.com/lisabot/lisa/messages"
)

// ModelsError says why GET /models failed: the HTTP status when the server
// answered (0 when it did not), and the failure classified like every
// other of this client's. It holds no provider text and no key.
type ModelsError struct {
	// Status is the HTTP status of the answer; 0 when none came.
	Status int
	// Err is the classified failure.
	Err *messages.Error
	// Cause is the network error without the URL, when no answer came.
	Cause string
}

// Error implements error.
func (e *ModelsError) Error() string {
	if e.Cause != "" {
		return e.Err.Error() + ": " + e.Cause
	}
	return e.Err.Error()
}

// Unwrap returns the classified failure.
func (e *ModelsError) Unwrap() error { return e.Err }

// Models lists the model IDs the server offers (GET base_url/models), in
// its order. It makes one attempt, bounded by Timeout; `lisa doctor` uses
// it to check llm.model.
func (c *Client) Models(ctx context.Context) ([]string, error) {
	ctx, cancel := c.attemptContext(ctx)
	defer cancel()
	ctx, info := withInfo(ctx)
	list, err := c.api.ListModels(ctx)
	if err != nil {
		me := &ModelsError{Err: classify(ctx, err, info, c.redact)}
		var apiErr *openai.APIError
		var reqErr *openai.RequestError
		var uerr *url.Error
		switch {
		case errors.As(err, &apiErr):
			me.Status = apiErr.HTTPStatusCode
		case errors.As(err, &reqErr):
			me.Status = reqErr.HTTPStatusCode
		}
		if me.Status == 0 && ctx.Err() == nil && errors.As(err, &uerr) {
			me.Cause = uerr.Err.Error()
		}
		return nil, me
	}
	out := make([]string, 0, len(list.Models))
	for _, m := range list.Models {
		out = append(out, m.ID)
	}
	return out, nil
}
