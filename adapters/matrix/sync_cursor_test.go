package matrix

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
)

// TestSyncCursorRejection: each homeserver's answer to a since token it
// cannot use is a rejected cursor (a new baseline), whatever errcode it
// picks; other 400s on /sync are not. The bodies are the servers' own:
// Synapse 1.67.0 StreamToken.from_string (synapse/types.py) raises
// SynapseError(400, "Invalid stream token") with the default errcode
// M_UNKNOWN; Dendrite v0.13.8 answers M_INVALID_PARAM "malformed sync
// token"; the spec (and testkit/fakehs) M_UNKNOWN_POS.
func TestSyncCursorRejection(t *testing.T) {
	for _, c := range []struct {
		name, body string
		rejected   bool
	}{
		{"synapse 1.67", `{"errcode":"M_UNKNOWN","error":"Invalid stream token"}`, true},
		{"dendrite 0.13", `{"errcode":"M_INVALID_PARAM","error":"malformed sync token"}`, true},
		{"spec", `{"errcode":"M_UNKNOWN_POS","error":"Unknown position"}`, true},
		{"bad filter", `{"errcode":"M_INVALID_PARAM","error":"Invalid filter"}`, false},
		{"other unknown", `{"errcode":"M_UNKNOWN","error":"Something went wrong"}`, false},
		{"bad json", `{"errcode":"M_BAD_JSON","error":"Invalid token in JSON"}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, c.body)
			}))
			defer srv.Close()
			cli, err := mautrix.NewClient(srv.URL, id.UserID("@lisa:hs"), "token")
			if err != nil {
				t.Fatal(err)
			}
			_, err = cli.FullSyncRequest(context.Background(), mautrix.ReqSync{Since: "garbage"})
			le := classifySync(err)
			if got := le.Code == messages.CodeCursorRejected; got != c.rejected {
				t.Fatalf("%s: classified as %+v, want cursor rejected = %v", c.body, le, c.rejected)
			}
			if !le.Permanent {
				t.Errorf("a 400 is permanent: %+v", le)
			}
		})
	}
}
