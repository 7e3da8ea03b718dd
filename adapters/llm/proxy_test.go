package llm

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/testkit/llmfake"
	"github.com/lisabot/lisa/testkit/proxyenv"
)

// proxyHelperEnv carries the fake endpoint's address to the re-executed
// test binary in TestNewIgnoresProxyEnvironment.
const proxyHelperEnv = "LISA_LLM_PROXY_HELPER"

// defaultTransport digs the *http.Transport out of a Client built without
// Config.HTTPClient.
func defaultTransport(t *testing.T, c *Client) *http.Transport {
	t.Helper()
	tap, ok := c.http.Transport.(wireTransport)
	if !ok {
		t.Fatalf("transport is %T, want wireTransport", c.http.Transport)
	}
	tr, ok := tap.base.(*http.Transport)
	if !ok {
		t.Fatalf("base transport is %T, want *http.Transport", tap.base)
	}
	return tr
}

// TestNewRefusesProxyEnvironment: without Config.HTTPClient the client
// gets its own transport with no Proxy function (not the shared
// http.DefaultTransport, which reads HTTP(S)_PROXY); a caller's
// transport is left as it is.
func TestNewRefusesProxyEnvironment(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no client":            {BaseURL: "http://llm.example.com/v1", Timeout: time.Second},
		"client, no transport": {BaseURL: "http://llm.example.com/v1", HTTPClient: &http.Client{Timeout: time.Second}},
	} {
		tr := defaultTransport(t, New(cfg))
		if tr == http.DefaultTransport {
			t.Errorf("%s: uses the shared http.DefaultTransport", name)
		}
		if tr.Proxy != nil {
			t.Errorf("%s: Proxy is set; Lisa must not use proxy environment variables", name)
		}
	}
	mine := &http.Transport{Proxy: http.ProxyFromEnvironment}
	if got := defaultTransport(t, New(Config{HTTPClient: &http.Client{Transport: mine}})); got != mine {
		t.Error("a caller's transport was replaced")
	}
}

// TestNewIgnoresProxyEnvironment runs the test binary again with every
// proxy variable naming a loopback listener that counts connections (a
// fresh process, because http.ProxyFromEnvironment reads the environment
// once). The helper calls the fake endpoint by a non-loopback name, which
// the proxy functions would route through the proxy; its dial hook maps
// the name to the fake.
func TestNewIgnoresProxyEnvironment(t *testing.T) {
	if addr := os.Getenv(proxyHelperEnv); addr != "" {
		_, port, _ := net.SplitHostPort(addr)
		c := New(Config{BaseURL: "http://llm.example.com:" + port + "/v1", APIKey: "k", Model: "m", Timeout: 10 * time.Second})
		var d net.Dialer
		defaultTransport(t, c).DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
			if a == "llm.example.com:"+port {
				a = addr
			}
			return d.DialContext(ctx, network, a)
		}
		got, err := c.Complete(context.Background(), "system", "user")
		if err != nil || got != "direct" {
			t.Fatalf("helper: Complete = %q, %v", got, err)
		}
		t.Log("proxy helper: answered directly")
		return
	}
	srv := llmfake.Start(t, llmfake.WithAPIKey("k"), llmfake.WithModels("m"))
	srv.Enqueue(llmfake.Text("direct"))
	proxyURL, conns := proxyenv.CountingProxy(t)

	env := proxyenv.Env(proxyURL)
	host := strings.TrimPrefix(strings.TrimSuffix(srv.URL(), "/v1"), "http://")
	cmd := exec.Command(os.Args[0], "-test.run=^TestNewIgnoresProxyEnvironment$", "-test.count=1", "-test.v")
	cmd.Env = append(env, proxyHelperEnv+"="+host)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "proxy helper: answered directly") {
		t.Errorf("helper failed: %v\n%s", err, out)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the environment's proxy got %d connections, want 0", n)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("fake endpoint got %d requests, want 1", n)
	}
}
