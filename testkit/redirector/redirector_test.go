package redirector

import (
	"net/http"
	"testing"
)

// TestPairCountsCredentials: an unguarded Go client does hand its
// Authorization header to the other port, which the pair sees; that is
// what the tests built on it assert against.
func TestPairCountsCredentials(t *testing.T) {
	p := Start(t, http.StatusTemporaryRedirect)
	req, err := http.NewRequest(http.MethodGet, p.HomeURL+"/a?b=c", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer x")
	resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if p.Reached() != 1 || p.Credentialed() != 1 {
		t.Errorf("reached %d, credentialed %d; want 1, 1", p.Reached(), p.Credentialed())
	}
}
