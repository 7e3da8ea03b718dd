package llmfake_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/lisabot/lisa/devkit/llmscript"
	"github.com/lisabot/lisa/testkit/llmfake"
)

// TestStart checks the wrapper: Start listens, the forwarded constructors
// script the devkit server, and the server is closed when the test ends.
// The server's behaviour itself is tested in devkit/llmscript.
func TestStart(t *testing.T) {
	var srv *llmscript.Server // llmfake.Server is an alias
	if !t.Run("serve", func(t *testing.T) {
		srv = llmfake.Start(t, llmfake.WithModels("m"), llmfake.WithDefault(llmfake.Text("default")))
		srv.Enqueue(llmfake.Answer("scripted"))
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
		resp, err := http.Post(srv.URL()+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got struct {
			Choices []struct {
				Message struct{ Content string }
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || len(got.Choices) != 1 ||
			got.Choices[0].Message.Content != `{"markdown":"scripted","source_urls":[]}` {
			t.Fatalf("reply = %d %+v", resp.StatusCode, got)
		}
		var reqs []llmfake.Request = srv.Requests()
		if len(reqs) != 1 || reqs[0].LastUser() != "hi" {
			t.Fatalf("requests = %+v", reqs)
		}
	}) {
		return
	}
	resp, err := http.Get(srv.URL() + "/models")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("server still answers after its test ended: HTTP %d", resp.StatusCode)
	}
}
