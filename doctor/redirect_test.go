package doctor_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/lisabot/lisa/doctor"
	"github.com/lisabot/lisa/testkit/redirector"
)

// TestDoctorCredentialsStayHome (#39 item 3): a homeserver and an LLM
// server that redirect every request to another port of the same host
// get no request there from `lisa doctor` (so neither the access token
// nor the API key is delivered), and the report says the redirect was
// refused and which key to change.
func TestDoctorCredentialsStayHome(t *testing.T) {
	hs := redirector.Start(t, http.StatusTemporaryRedirect)
	llm := redirector.Start(t, http.StatusTemporaryRedirect)
	dir := t.TempDir()
	path := writeConfig(t, dir, offlineConfig(hs.HomeURL, llm.HomeURL, silent(t), "data"))
	rep, err := doctor.Run(context.Background(), doctor.Options{ConfigPath: path, Getenv: offlineEnv,
		Only: []string{"homeserver", "llm"}})
	if err != nil {
		t.Fatal(err)
	}
	out := text(rep)
	for name, p := range map[string]*redirector.Pair{"homeserver": hs, "llm": llm} {
		if p.Reached() != 0 || p.Credentialed() != 0 {
			t.Errorf("%s: the other port got %d requests, %d with credentials", name, p.Reached(), p.Credentialed())
		}
		if len(find(rep, name, "refused")) == 0 {
			t.Errorf("no %s line says the redirect was refused", name)
		}
	}
	if rep.Code() != doctor.ExitFailed || t.Failed() {
		t.Fatalf("exit %d:\n%s", rep.Code(), out)
	}
	noSecrets(t, out, offlineToken)
}
