package doctor_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/doctor"
	"github.com/lisabot/lisa/testkit/homeserver"
)

// TestRateLimitOnSynapse: the doctor's "rate limit" line tells the truth
// about a Synapse 1.67.0 with its default limits (rc_message 0.2/s, burst
// 10), asked with the token of a server admin. It runs on Synapse only:
// its subject is Synapse's admin API (POST/GET
// /_synapse/admin/v1/users/<user>/override_ratelimit,
// UserRatelimitRestServlet in synapse/rest/admin/users.py), which no
// other server has (TestDoctorAgainstHomeservers checks Dendrite's answer).
// Without an override the line warns, and a burst of sends does meet a
// 429; after the fix the line gives (0/0) it says exempt, and the same
// burst goes through (Ratelimiter.can_do_action, synapse/api/ratelimiting.py,
// lets a user with a zero messages_per_second override pass); an override
// of its own is named with its numbers.
func TestRateLimitOnSynapse(t *testing.T) {
	// Start skips in one line naming what Synapse lacks here, unless
	// LISA_REQUIRE_SYNAPSE=1 (CI) makes that a failure.
	hs := homeserver.Start(t, homeserver.Synapse, homeserver.Options{RateLimits: true})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// Lisa is a server admin here: only an admin may ask the API.
	bot, err := hs.RegisterAdmin(ctx, "lisa", "lisa-password-1", "LISATEST")
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, ctx: ctx, hs: hs, bot: bot}
	w.startFakes()
	cli, err := mautrix.NewClient(hs.URL(), id.UserID(bot.UserID), bot.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	room, err := cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat"})
	if err != nil {
		t.Fatal(err)
	}
	path, env := w.write(setup{rooms: []id.RoomID{room.RoomID}})
	line := func(want string, status doctor.Status) {
		t.Helper()
		rep := run(t, path, env, "homeserver")
		lines := find(rep, "homeserver", want)
		if len(lines) != 1 || lines[0].Status != status {
			t.Fatalf("want one %s homeserver line with %q:\n%s", status, want, text(rep))
		}
		if status == doctor.Warning && (rep.Code() != doctor.ExitWarnings ||
			!strings.Contains(lines[0].Fix, "/_synapse/admin/v1/users/"+bot.UserID+"/override_ratelimit")) {
			t.Fatalf("exit %d, fix %q", rep.Code(), lines[0].Fix)
		}
		noSecrets(t, text(rep), bot.AccessToken)
	}
	// burst sends n messages at once and returns how many were refused
	// with 429 M_LIMIT_EXCEEDED.
	burst := func(n int) (limited int) {
		t.Helper()
		for i := range n {
			_, err := cli.SendText(ctx, room.RoomID, fmt.Sprintf("message %d", i))
			switch {
			case errors.Is(err, mautrix.MLimitExceeded):
				limited++
			case err != nil:
				t.Fatal(err)
			}
		}
		return limited
	}
	override := func(body map[string]int) {
		t.Helper()
		u := cli.BuildURL(mautrix.SynapseAdminURLPath{"v1", "users", bot.UserID, "override_ratelimit"})
		if _, err := cli.MakeRequest(ctx, http.MethodPost, u, body, nil); err != nil {
			t.Fatal(err)
		}
	}

	line("the bot account is held to the homeserver's message rate limit", doctor.Warning)
	n := burst(15)
	t.Logf("without an override, %d of 15 sends at once met 429 M_LIMIT_EXCEEDED", n)
	if n == 0 {
		t.Fatal("15 sends at once met no 429: the warning would be wrong")
	}
	override(map[string]int{"messages_per_second": 0, "burst_count": 0})
	line("the bot account is exempt from the homeserver's message rate limit", doctor.OK)
	if n := burst(15); n != 0 {
		t.Fatalf("%d of 15 sends refused with 429 after the exemption the doctor reports", n)
	}
	override(map[string]int{"messages_per_second": 1, "burst_count": 5})
	line("the bot account has its own message rate limit: 1 messages/s, burst 5", doctor.Warning)
}
