package matrix

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/testkit/redirector"
)

// TestAccessTokenStaysHome (#39 item 3): a homeserver that redirects to
// another port of the same host gets no request from Lisa there — not the
// whoami of Connect, not a send (PUT with a body, 307/308) — so the access
// token is not delivered; the error says why and does not name the token.
// Before the guard Go copied "Authorization: Bearer syt_…" to the other
// port.
func TestAccessTokenStaysHome(t *testing.T) {
	const token = "syt_redirect_secret_4242"
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		p := redirector.Start(t, status)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, connectErr := Connect(ctx, p.HomeURL, "@lisa:localhost", "LISADEV", token, nil)
		c, err := Open(p.HomeURL, "@lisa:localhost", "LISADEV", token, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, sendErr := c.SendReply(ctx, "!room:localhost", "txn1", []byte(`{"msgtype":"m.text","body":"hi"}`))
		cancel()
		for name, err := range map[string]error{"Connect": connectErr, "SendReply": sendErr} {
			if err == nil || !strings.Contains(err.Error(), "redirect") {
				t.Errorf("%d: %s: %v, want a refused redirect", status, name, err)
			} else if strings.Contains(err.Error(), token) {
				t.Errorf("%d: %s: error names the token: %v", status, name, err)
			}
		}
		if p.Credentialed() != 0 || p.Reached() != 0 {
			t.Errorf("%d: the other port got %d requests, %d with the token", status, p.Reached(), p.Credentialed())
		}
	}
}
