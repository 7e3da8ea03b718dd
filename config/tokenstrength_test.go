package config

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// TestTokenStrengthBits (#39 item 7): the estimate of each shape, and
// which are refused (under MinStatusTokenBits).
func TestTokenStrengthBits(t *testing.T) {
	for _, c := range []struct {
		token   string
		bits    float64
		refused bool
	}{
		{"a", math.Log2(26), true},
		{"1234", 2 * math.Log2(10), true},
		{"hunter2hunter2", 7 * math.Log2(36), true},
		{strings.Repeat("ab", 40), 2 * math.Log2(26), true},
		{strings.Repeat("a", 100), math.Log2(26), true},
		{"abcdefghijklmnopqrstuvwxyz0123456789", 4 * math.Log2(36), true},
		// Words are not recognised (documented): characters as if random.
		{"Correct-Horse-Battery", 21 * math.Log2(85), false},
		// openssl rand -hex 16 / 32
		{"3f9a0c2e7b14d85a6e0f9c3b2a7d1e48", 32 * 4, false},
		{"3f9a0c2e7b14d85a6e0f9c3b2a7d1e48b5c60f1a2e9d7c834f0b6a1e5d2c9f7a", 64 * 4, false},
		{"3F9A0C2E7B14D85A6E0F9C3B2A7D1E4", 31 * 4, true},
		// openssl rand -base64 32 | tr -d '='
		{"q8Zt3vKx0pLm9RwN2yHc6bJf4sGd1aUe7oVi5kXr8nQ", 43 * math.Log2(62), false},
		{"q8Zt3vKx0pLm9RwN2yHc", 20 * math.Log2(62), true},
		{"", 0, true},
	} {
		got := TokenStrengthBits(c.token)
		if math.Abs(got-c.bits) > 1e-9 {
			t.Errorf("TokenStrengthBits(%q) = %.2f, want %.2f", c.token, got, c.bits)
		}
		if refused := got < MinStatusTokenBits; refused != c.refused {
			t.Errorf("%q (%.1f bits): refused %v, want %v", c.token, got, refused, c.refused)
		}
	}
}

// TestResolveRefusesWeakStatusToken (#39 item 7): check-config (Resolve)
// refuses a weak status token, on a remote or a loopback page, without
// showing it; a strong one passes.
func TestResolveRefusesWeakStatusToken(t *testing.T) {
	for _, c := range []struct {
		name, listen, value string
		remote, refused     bool
	}{
		{"remote, one letter", "0.0.0.0:8088", "a", true, true},
		{"remote, 1234", "0.0.0.0:8088", "1234", true, true},
		{"loopback, 1234", "127.0.0.1:8088", "1234", false, true},
		{"remote, 32 random bytes", "0.0.0.0:8088", "q8Zt3vKx0pLm9RwN2yHc6bJf4sGd1aUe7oVi5kXr8nQ", true, false},
		{"loopback, 32 random bytes", "127.0.0.1:8088", "q8Zt3vKx0pLm9RwN2yHc6bJf4sGd1aUe7oVi5kXr8nQ", false, false},
	} {
		f := newResolveFixture(t)
		f.cfg.Runtime.StatusListen, f.cfg.Runtime.StatusAllowRemote, f.cfg.Runtime.StatusToken = c.listen, c.remote, EnvRef("LISA_STATUS_TOKEN")
		f.env["LISA_STATUS_TOKEN"] = c.value
		res, ps := f.resolve(t)
		var keys []string
		for _, p := range ps {
			keys = append(keys, p.Key)
		}
		if got := slices.Contains(keys, "runtime.status_token"); got != c.refused {
			t.Errorf("%s: refused %v, want %v (%v)", c.name, got, c.refused, ps)
		}
		if len(ps) > 0 && strings.Contains(ps.Error(), c.value+" ") {
			t.Errorf("%s: the value is shown: %v", c.name, ps)
		}
		if !c.refused && res.StatusToken.Reveal() != c.value {
			t.Errorf("%s: the token is not resolved", c.name)
		}
	}
}
