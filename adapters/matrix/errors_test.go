package matrix

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
)

// TestClassifyHomeserverAnswers sends a reply through a real mautrix client
// to a server scripted per case and checks how the failure is classified:
// above all, an accepted request whose answer cannot be read is ambiguous
// (the reply may exist), never a permanent rejection.
func TestClassifyHomeserverAnswers(t *testing.T) {
	cases := []struct {
		name      string
		status    int
		body      string
		hangUp    bool
		code      messages.Code
		permanent bool
		ambiguous bool
		retry     time.Duration
	}{
		{"truncated 200", 200, `{"event_id":"$ab`, false, messages.CodeMatrixUnavailable, false, true, 0},
		{"wrong type 200", 200, `{"event_id":12345}`, false, messages.CodeMatrixUnavailable, false, true, 0},
		{"not json 200", 200, `<html>proxy</html>`, false, messages.CodeMatrixUnavailable, false, true, 0},
		{"rate limited", 429, `{"errcode":"M_LIMIT_EXCEEDED","error":"slow","retry_after_ms":1500}`, false, messages.CodeMatrixRateLimit, false, false, 1500 * time.Millisecond},
		{"server error", 503, `{"errcode":"M_UNKNOWN"}`, false, messages.CodeMatrixUnavailable, false, true, 0},
		{"bad token", 401, `{"errcode":"M_UNKNOWN_TOKEN"}`, false, messages.CodeMatrixForbidden, false, false, 0},
		{"forbidden", 403, `{"errcode":"M_FORBIDDEN"}`, false, messages.CodeMatrixForbidden, true, false, 0},
		{"bad request", 400, `{"errcode":"M_BAD_JSON"}`, false, messages.CodeMatrixRejected, true, false, 0},
		{"connection dropped", 0, ``, true, messages.CodeMatrixUnavailable, false, true, 0},
		{"internal error", 500, `{"errcode":"M_UNKNOWN"}`, false, messages.CodeMatrixUnavailable, false, true, 0},
		{"bad gateway", 502, `<html>nginx</html>`, false, messages.CodeMatrixUnavailable, false, true, 0},
	}
	// The homeserver may be restarting: it dropped the connection, or a
	// gateway in front of it says it is down (the room then treats it
	// like a failed /sync, see room.Flights).
	unreachable := map[string]bool{"server error": true, "connection dropped": true, "bad gateway": true}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				if c.hangUp {
					conn, _, _ := w.(http.Hijacker).Hijack()
					if tc, ok := conn.(*net.TCPConn); ok {
						_ = tc.SetLinger(0)
					}
					_ = conn.Close()
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, c.body)
			}))
			defer srv.Close()
			cli, err := mautrix.NewClient(srv.URL, id.UserID("@lisa:hs"), "token")
			if err != nil {
				t.Fatal(err)
			}
			cli.DefaultHTTPRetries = 0
			c2 := &Client{cli: cli}
			_, err = c2.SendReply(context.Background(), "!r:hs", "txn1", json.RawMessage(`{"msgtype":"m.text","body":"x"}`))
			le, ok := err.(*messages.Error)
			if !ok {
				t.Fatalf("error %T %v", err, err)
			}
			if le.Code != c.code || le.Permanent != c.permanent || le.Ambiguous != c.ambiguous || le.RetryAfter != c.retry {
				t.Fatalf("classified as %+v, want code %s permanent %v ambiguous %v retry %v", le, c.code, c.permanent, c.ambiguous, c.retry)
			}
			if le.Unreachable != unreachable[c.name] {
				t.Fatalf("unreachable = %v, want %v", le.Unreachable, unreachable[c.name])
			}
		})
	}
}
