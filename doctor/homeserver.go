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
