package chaos

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/devkit/homeserver"
)

// TestLateStoreWindowDependsOnTheServer: only Dendrite may store a send
// after a restart; Synapse stores it within its request or never.
func TestLateStoreWindowDependsOnTheServer(t *testing.T) {
	if got := lateStoreWindow(homeserver.Dendrite); got != dendriteLateStore {
		t.Errorf("dendrite: %s, want %s", got, dendriteLateStore)
	}
	if got := lateStoreWindow(homeserver.Synapse); got != 0 {
		t.Errorf("synapse: %s, want 0", got)
	}
	// Lisa's own hold (matrix.late_store_seconds, 330 s) fits in the
	// answers' deadline on every server.
	if lisaHold < 330*time.Second {
		t.Errorf("lisaHold %s is shorter than Lisa's default hold", lisaHold)
	}
}

// TestReportNamesTheHomeserver: the report's text says which server and
// version the campaign ran on, and its replay line repeats a --homeserver
// other than the default.
func TestReportNamesTheHomeserver(t *testing.T) {
	for _, tc := range []struct {
		rep    Report
		says   []string
		replay string
	}{
		{Report{Seed: 7, Homeserver: "synapse", HomeserverVersion: "1.67.0", TxnIDsSurviveRestart: true, HomeserverRestarts: 3, HomeserverMoves: 1},
			[]string{"synapse 1.67.0 (transaction IDs survive its restarts: yes", "3 (1 moved to another port)"}, "--seed 7 --homeserver synapse)"},
		{Report{Seed: 8, Homeserver: "dendrite", HomeserverVersion: "v0.13.8", LateStoreWait: 5 * time.Minute},
			[]string{"dendrite v0.13.8 (transaction IDs survive its restarts: no; then waited 5m0s more for late stores)"}, "--seed 8)"},
	} {
		var b strings.Builder
		tc.rep.WriteText(&b)
		for _, want := range append(tc.says, tc.replay, "replies held", "sent while faults were injected", "max recovery time", "duplicates", "losses") {
			if !strings.Contains(b.String(), want) {
				t.Errorf("report lacks %q:\n%s", want, &b)
			}
		}
	}
}

// TestProxySetTarget: a proxy follows its upstream to a new address (a
// homeserver that moved on restart) under the same URL.
func TestProxySetTarget(t *testing.T) {
	serve := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Server", name)
			_, _ = io.WriteString(w, name)
		}))
	}
	a, b := serve("a"), serve("b")
	defer a.Close()
	defer b.Close()
	p, err := NewProxy(a.URL, NetPlan{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	get := func() string {
		t.Helper()
		resp, err := http.Get(p.URL() + "/x")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if h := resp.Header.Get("Server"); h != string(body) {
			t.Errorf("Server header %q, body %q: the proxy must pass the header on (Lisa identifies the server by it)", h, body)
		}
		return string(body)
	}
	if got := get(); got != "a" {
		t.Fatalf("before: %q", got)
	}
	if err := p.SetTarget(b.URL); err != nil {
		t.Fatal(err)
	}
	if got := get(); got != "b" {
		t.Fatalf("after SetTarget: %q", got)
	}
	if err := p.SetTarget("ftp://nowhere"); err == nil {
		t.Error("SetTarget accepted a non-HTTP target")
	}
}
