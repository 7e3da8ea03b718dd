package doctor

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/lisabot/lisa/adapters/search"
	"github.com/lisabot/lisa/messages"
)

// testQuery is what the search check asks SearXNG.
const testQuery = "matrix chat"

// searchSection: SearXNG answers a query in its JSON format.
func searchSection() Section {
	return Section{Name: "search", Checks: []Check{{Name: "query", Run: checkSearch}}}
}

func checkSearch(ctx context.Context, e *Env) []Result {
	c := e.Res.Config.Search
	if !c.Enabled() {
		return []Result{{Status: OK, Message: "web search is off (search.endpoint is empty): the model is not offered web_search"}}
	}
	cl := search.New(search.Config{Endpoint: c.Endpoint, APIKey: e.Res.SearchAPIKey.Reveal(),
		Timeout: e.RequestTimeout, UserAgent: e.Res.Config.Web.UserAgent, MaxResults: c.MaxResults})
	p, err := cl.Check(ctx, testQuery)
	ep := c.Endpoint
	switch {
	case p.Status == http.StatusForbidden:
		// SearXNG answers a format missing from search.formats in its
		// settings.yml with 403 Forbidden; only html is on by default
		// (https://docs.searxng.org/admin/settings/settings_search.html).
		return []Result{{Status: Failed, Message: fmt.Sprintf("%s refused format=json (HTTP 403): SearXNG serves only the formats its settings allow", ep),
			Fix: "add json to search.formats in SearXNG's settings.yml (formats: [html, json]) and restart SearXNG"}}
	case p.Status == http.StatusUnauthorized:
		return []Result{{Status: Failed, Message: fmt.Sprintf("%s refused the request (HTTP 401)", ep),
			Fix: fmt.Sprintf("search.api_key (%s) must hold a key the service accepts", c.APIKey)}}
	case p.Status == http.StatusTooManyRequests:
		return []Result{{Status: Warning, Message: fmt.Sprintf("%s rate-limits Lisa (HTTP 429)", ep),
			Fix: "turn SearXNG's limiter off for Lisa (server.limiter in settings.yml, or pass her address in its bot detection)"}}
	case p.Status != 0 && p.Status != http.StatusOK:
		return []Result{{Status: Failed, Message: fmt.Sprintf("%s answered the test query with HTTP %d", ep, p.Status),
			Fix: "search.endpoint is SearXNG's /search URL"}}
	case err != nil:
		return []Result{searchFailure(e, ep, p, err)}
	case p.Results == 0:
		return []Result{{Status: Warning, Message: fmt.Sprintf("%s answers format=json, but found nothing for %q", ep, testQuery),
			Fix: "check SearXNG's engines and its outgoing network"}}
	}
	return []Result{{Status: OK, Message: fmt.Sprintf("%s answers a test query with format=json (results: %d)", ep, p.Results)}}
}

// searchFailure is the line for a search that got no usable answer.
func searchFailure(e *Env, ep string, p search.Probe, err error) Result {
	var te *messages.ToolError
	errors.As(err, &te)
	switch {
	case p.Status == http.StatusOK:
		return Result{Status: Failed, Message: fmt.Sprintf("%s answered, but not with SearXNG's JSON: %v", ep, err),
			Fix: "search.endpoint is SearXNG's /search URL"}
	case te != nil && te.Code == messages.ToolTimeout:
		return Result{Status: Failed, Message: fmt.Sprintf("%s did not answer the test query within %s", ep, e.RequestTimeout), Fix: "search.endpoint"}
	}
	if p.Cause != "" {
		return Result{Status: Failed, Message: fmt.Sprintf("cannot reach %s: %s", ep, p.Cause), Fix: "search.endpoint"}
	}
	return Result{Status: Failed, Message: fmt.Sprintf("the test query to %s failed: %v", ep, err), Fix: "search.endpoint"}
}
