package doctor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/lisabot/lisa/adapters/matrix"
)

// homeserverSection: the homeserver answers, with which spec versions,
// and the access token is Lisa's, on the configured device.
func homeserverSection() Section {
	return Section{Name: "homeserver", Checks: []Check{
		{Name: "versions", Run: checkVersions},
		{Name: "whoami", Run: checkWhoami},
		{Name: "rate limit", Run: checkRateLimit},
	}}
}

func checkVersions(_ context.Context, e *Env) []Result {
	url := e.Res.Config.Matrix.HomeserverURL
	vs, err := e.Versions()
	if err != nil {
		return []Result{unreachable(e, "the homeserver "+url, "GET /_matrix/client/versions", err, "matrix.homeserver_url")}
	}
	list := summarizeVersions(vs)
	if !hasV1(vs) {
		return []Result{{Status: Warning, Message: fmt.Sprintf("%s answers, but supports none of the Matrix v1.x spec versions (%s); Lisa uses the v3 client API", url, list),
			Fix: "a homeserver that supports Matrix v1.1 or later"}}
	}
	return []Result{{Status: OK, Message: fmt.Sprintf("%s answers; spec versions %s", url, list)}}
}

func checkWhoami(_ context.Context, e *Env) []Result {
	m := e.Res.Config.Matrix
	user, device, err := e.Whoami()
	var pe *matrix.ProbeError
	switch {
	case errors.Is(err, errHomeserverDown):
		return []Result{{Status: Skipped, Message: "whoami not asked: " + err.Error()}}
	case errors.As(err, &pe) && pe.Status == http.StatusUnauthorized:
		return []Result{{Status: Failed, Message: fmt.Sprintf("the homeserver does not accept the access token (%s)", pe),
			Fix: fmt.Sprintf("give matrix.access_token (%s) a current token of %s, device %s", m.AccessToken, m.UserID, m.DeviceID)}}
	case err != nil:
		return []Result{unreachable(e, "the homeserver", "whoami", err, "matrix.homeserver_url")}
	case user != m.UserID:
		return []Result{{Status: Failed, Message: fmt.Sprintf("the access token belongs to %s, not to %s", user, m.UserID),
			Fix: fmt.Sprintf("matrix.access_token (%s) must be a token of matrix.user_id", m.AccessToken)}}
	case device != m.DeviceID:
		return []Result{{Status: Failed, Message: fmt.Sprintf("the access token belongs to device %s, not to device %s", device, m.DeviceID),
			Fix: fmt.Sprintf("set matrix.device_id = %q, or give matrix.access_token a token of device %s", device, m.DeviceID)}}
	}
	return []Result{{Status: OK, Message: fmt.Sprintf("the access token belongs to %s, device %s, as configured", user, device)}}
}

// unreachable is the line for a request to what that failed: it names the
// status, or the network error, or the time limit, and key to check.
func unreachable(e *Env, what, request string, err error, key string) Result {
	var pe *matrix.ProbeError
	switch {
	case errors.As(err, &pe) && pe.Timeout:
		return Result{Status: Failed, Message: fmt.Sprintf("%s did not answer %s within %s", what, request, e.RequestTimeout), Fix: key}
	case errors.As(err, &pe) && pe.Status != 0:
		return Result{Status: Failed, Message: fmt.Sprintf("%s answered %s with %s", what, request, pe), Fix: key}
	case errors.As(err, &pe):
		return Result{Status: Failed, Message: fmt.Sprintf("cannot reach %s: %s", what, pe), Fix: key}
	}
	return Result{Status: Failed, Message: fmt.Sprintf("%s: %s failed: %v", what, request, err), Fix: key}
}

// hasV1 reports whether vs holds a v1.x version.
func hasV1(vs []string) bool {
	for _, v := range vs {
		if strings.HasPrefix(v, "v1.") {
			return true
		}
	}
	return false
}

// summarizeVersions lists a few versions: the oldest, "…", the newest.
func summarizeVersions(vs []string) string {
	switch {
	case len(vs) == 0:
		return "none"
	case len(vs) <= 3:
		return strings.Join(vs, ", ")
	}
	return fmt.Sprintf("%s … %s (%d)", vs[0], vs[len(vs)-1], len(vs))
}

// checkRateLimit says whether the bot account is held to the homeserver's
// message rate limit, where the server tells (Synapse's admin API, asked
// with Lisa's own token: it answers only for a server admin). Synapse's
// default rc_message is 0.2 messages/s with a burst of 10
// (synapse/config/ratelimiting.py, v1.67.0): a busy evening across rooms
// meets it, and each reply then waits for the server's retry_after_ms.
func checkRateLimit(_ context.Context, e *Env) []Result {
	m := e.Res.Config.Matrix
	fix := fmt.Sprintf(`exempt the bot account: as a Synapse admin, POST /_synapse/admin/v1/users/%s/override_ratelimit with {"messages_per_second": 0, "burst_count": 0}`, m.UserID)
	if _, _, err := e.Whoami(); err != nil {
		return []Result{{Status: Skipped, Message: "rate limit not asked: the access token was not checked (see whoami)"}}
	}
	o, err := request(e, func(ctx context.Context) (matrix.RateLimitOverride, error) {
		return e.Matrix().RateLimitOverride(ctx, m.UserID)
	})
	var pe *matrix.ProbeError
	switch {
	case errors.As(err, &pe) && pe.Status == http.StatusForbidden:
		return []Result{{Status: OK, Message: "the homeserver did not say whether the bot account is rate-limited (its admin API answers only a server admin); if `lisa_matrix_rate_limited_total` grows, replies wait for the server's rate limit",
			Fix: fix}}
	case errors.As(err, &pe) && (pe.Status == http.StatusNotFound || pe.Status == http.StatusBadRequest || pe.ErrCode == "M_UNRECOGNIZED"):
		return []Result{{Status: OK, Message: "the homeserver has no Synapse admin API for rate limits (not Synapse, or not routed): `lisa_matrix_rate_limited_total` counts any 429 her replies meet"}}
	case err != nil:
		return []Result{{Status: OK, Message: fmt.Sprintf("the rate limit of the bot account could not be asked (%v)", err)}}
	case !o.Overridden:
		return []Result{{Status: Warning, Message: "the bot account is held to the homeserver's message rate limit (Synapse's rc_message: 0.2 messages/s, burst 10, by default): replies beyond it wait for the server's retry_after_ms",
			Fix: fix}}
	case o.MessagesPerSecond == 0 && o.BurstCount == 0:
		return []Result{{Status: OK, Message: "the bot account is exempt from the homeserver's message rate limit"}}
	}
	return []Result{{Status: Warning, Message: fmt.Sprintf("the bot account has its own message rate limit: %g messages/s, burst %g", o.MessagesPerSecond, o.BurstCount), Fix: fix}}
}
