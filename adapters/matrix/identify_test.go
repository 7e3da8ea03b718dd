package matrix

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestIdentify: the Server header of the client API first, then the
// federation version; neither asked with the access token; nothing known
// when a proxy hides both.
func TestIdentify(t *testing.T) {
	cases := []struct {
		name       string
		header     string
		federation string // "" answers 404
		want       ServerIdentity
	}{
		{"synapse header", "Synapse/1.67.0", "", ServerIdentity{Name: "Synapse", Version: "1.67.0", From: "server header"}},
		{"behind nginx, federation routed", "nginx", `{"server":{"name":"Synapse","version":"1.67.0"}}`, ServerIdentity{Name: "Synapse", Version: "1.67.0", From: "federation version"}},
		{"behind nginx, federation not routed", "nginx", "", ServerIdentity{Name: "nginx", From: "server header"}},
		{"no header, federation routed", "", `{"server":{"name":"Dendrite","version":"0.13.8+d2d8dd9"}}`, ServerIdentity{Name: "Dendrite", Version: "0.13.8+d2d8dd9", From: "federation version"}},
		{"nothing said", "", "", ServerIdentity{}},
		{"federation garbage", "", `{"server":`, ServerIdentity{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "" {
					t.Errorf("%s asked with an access token", r.URL.Path)
				}
				if tc.header != "" {
					w.Header().Set("Server", tc.header)
				} else {
					w.Header()["Server"] = nil
				}
				switch {
				case r.URL.Path == "/_matrix/client/versions":
					_, _ = w.Write([]byte(`{"versions":["v1.1"]}`))
				case r.URL.Path == "/_matrix/federation/v1/version" && tc.federation != "":
					_, _ = w.Write([]byte(tc.federation))
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			c, err := Open(srv.URL, "@lisa:localhost", "DEV", "syt_secret_token", nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Identify(context.Background(), 5*time.Second); got != tc.want {
				t.Fatalf("Identify = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestTxnIDPolicy: "auto" trusts only Synapse from 1.67 on; "yes" and
// "no" override; never trusting is the fallback.
func TestTxnIDPolicy(t *testing.T) {
	syn := ServerIdentity{Name: "Synapse", Version: "1.67.0", From: "server header"}
	cases := []struct {
		mode string
		id   ServerIdentity
		keep bool
		why  string
	}{
		{"auto", syn, true, "24 h"},
		{"auto", ServerIdentity{Name: "Synapse", Version: "1.98.0rc1"}, true, "Synapse 1.98.0rc1"},
		{"auto", ServerIdentity{Name: "Synapse", Version: "1.66.9"}, false, "older than 1.67.0"},
		{"auto", ServerIdentity{Name: "Synapse", Version: "weird"}, false, "older than 1.67.0"},
		{"auto", ServerIdentity{Name: "Dendrite", Version: "0.13.8"}, false, "Dendrite is not known"},
		{"auto", ServerIdentity{Name: "nginx"}, false, "nginx is not known"},
		{"auto", ServerIdentity{}, false, "did not say"},
		{"no", syn, false, `"no"`},
		{"yes", ServerIdentity{}, true, `"yes"`},
	}
	for _, tc := range cases {
		got := TxnIDPolicy(tc.mode, tc.id)
		if (got.Retention > 0) != tc.keep || !strings.Contains(got.Reason, tc.why) {
			t.Errorf("TxnIDPolicy(%q, %+v) = %+v, want keep %v, reason with %q", tc.mode, tc.id, got, tc.keep, tc.why)
		}
		if got.Retention > 0 && (!got.PerToken || got.Retention >= SynapseTxnRetention) {
			t.Errorf("TxnIDPolicy(%q, %+v) = %+v: per token, under the server's 24 h", tc.mode, tc.id, got)
		}
	}
}

// TestRateLimitOverride: Synapse's three answers (no override: {}; an
// exemption; a limit of its own), and a refusal for a token that is not
// an admin's, as RateLimitRestServlet gives them (v1.67.0).
func TestRateLimitOverride(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   RateLimitOverride
		errSub string
	}{
		{"no override", 200, `{}`, RateLimitOverride{}, ""},
		{"exempt", 200, `{"messages_per_second":0,"burst_count":0}`, RateLimitOverride{Overridden: true}, ""},
		{"own limit", 200, `{"messages_per_second":5,"burst_count":20}`, RateLimitOverride{Overridden: true, MessagesPerSecond: 5, BurstCount: 20}, ""},
		{"not an admin", 403, `{"errcode":"M_FORBIDDEN","error":"You are not a server admin"}`, RateLimitOverride{}, "403 M_FORBIDDEN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.EscapedPath() != "/_synapse/admin/v1/users/@lisa:localhost/override_ratelimit" && r.URL.Path != "/_synapse/admin/v1/users/@lisa:localhost/override_ratelimit" {
					t.Errorf("asked %s", r.URL.EscapedPath())
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c, err := Open(srv.URL, "@lisa:localhost", "DEV", "syt_secret_token", nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.RateLimitOverride(context.Background(), "@lisa:localhost")
			if tc.errSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSub) || strings.Contains(err.Error(), "syt_secret_token") {
					t.Fatalf("err = %v, want one naming %q (and no token)", err, tc.errSub)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("RateLimitOverride = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
