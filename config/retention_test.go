package config

import (
	"strings"
	"testing"
	"time"
)

// TestRetentionDays: runtime.retention_days defaults to a year and a bit,
// is read from the file and the environment, and a value outside 7–3650
// days or of the wrong type is refused with the key, the bounds and what
// the key does.
func TestRetentionDays(t *testing.T) {
	if d := Default().Runtime; d.RetentionDays != 400 || d.Retention() != 400*24*time.Hour {
		t.Fatalf("default %d days (%v)", d.RetentionDays, d.Retention())
	}
	for _, tc := range []struct {
		days int
		ok   bool
	}{
		{-1, false}, {0, false}, {6, false}, {7, true}, {30, true}, {400, true}, {3650, true}, {3651, false}, {1 << 40, false},
	} {
		c := validConfig()
		c.Runtime.RetentionDays = tc.days
		err := c.Validate()
		if tc.ok {
			if err != nil {
				t.Errorf("%d days refused: %v", tc.days, err)
			}
			continue
		}
		ps := problemsOf(t, err)
		if len(ps) != 1 {
			t.Errorf("%d days: problems %v", tc.days, ps)
		}
		wantProblem(t, ps, "runtime.retention_days", "must be between 7 and 3650 days", "never answered")
	}

	p := writeFile(t, t.TempDir(), "lisa.toml", minimalTOML+"retention_days = 30\n")
	got, err := Load(p, nil)
	if err != nil || got.Runtime.RetentionDays != 30 {
		t.Fatalf("from the file: %d %v", got.Runtime.RetentionDays, err)
	}
	got, err = Load(p, mapEnv(map[string]string{"LISA_RUNTIME__RETENTION_DAYS": "90"}))
	if err != nil || got.Runtime.RetentionDays != 90 {
		t.Fatalf("from the environment: %d %v", got.Runtime.RetentionDays, err)
	}
	p = writeFile(t, t.TempDir(), "lisa.toml", minimalTOML+"retention_days = \"30d\"\n")
	_, err = Load(p, nil)
	wantProblem(t, problemsOf(t, err), "runtime.retention_days", "integer, not a string")
	p = writeFile(t, t.TempDir(), "lisa.toml", minimalTOML+"retention_days = 3\n")
	got, err = Load(p, nil)
	if err == nil {
		err = got.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), "runtime.retention_days") {
		t.Errorf("3 days from the file: %v", err)
	}
}
