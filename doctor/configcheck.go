package doctor

import (
	"context"
	"errors"
	"fmt"

	"github.com/lisabot/lisa/config"
)

// configSection reports the loaded configuration. Loading it (what
// `lisa check-config` does, less the pandoc check, which is the converter
// section's) happens in Run before any section: an invalid file ends the
// run with [configProblems].
func configSection() Section {
	return Section{Name: "config", Checks: []Check{{
		Name: "file",
		Run: func(_ context.Context, e *Env) []Result {
			c := e.Res.Config
			search := "web search off"
			if c.Search.Enabled() {
				search = "web search on"
			}
			return []Result{{Status: OK, Message: fmt.Sprintf("%s is valid: %s (device %s), allowed rooms: %d, model %q, %s, data in %s",
				e.ConfigPath, c.Matrix.UserID, c.Matrix.DeviceID, len(c.Matrix.AllowedRoomIDs), c.LLM.Model, search, c.Runtime.DataDir)}}
		},
	}}}
}

// configProblems turns a failed load into lines: one per problem, naming
// its key, or the error as it is.
func configProblems(err error) []Result {
	var ps config.Problems
	if errors.As(err, &ps) {
		out := make([]Result, len(ps))
		for i, p := range ps {
			out[i] = Result{Section: "config", Status: Failed, Message: p.Message, Fix: p.Key}
		}
		return out
	}
	return []Result{{Section: "config", Status: Failed, Message: err.Error(), Fix: "the configuration file"}}
}
