package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// validConfig is Default plus every field only an operator can fill in.
// It passes Validate.
func validConfig() Config {
	c := Default()
	c.Matrix.HomeserverURL = "https://matrix.example.org"
	c.Matrix.UserID = "@lisa:example.org"
	c.Matrix.DeviceID = "LISABOT"
	c.Matrix.AccessToken = EnvRef("LISA_MATRIX_ACCESS_TOKEN")
	c.Matrix.AllowedRoomIDs = []string{"!room:example.org"}
	c.Matrix.MentionAliases = []string{"Lisa"}
	c.LLM.BaseURL = "http://127.0.0.1:8000/v1"
	c.LLM.Model = "test-model"
	c.Persona.Path = "persona.md"
	c.Runtime.DataDir = "data"
	return c
}

// problemsOf returns the Problems inside err, failing the test when err is
// some other error.
func problemsOf(t *testing.T, err error) Problems {
	t.Helper()
	if err == nil {
		return nil
	}
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error is %T, not Problems: %v", err, err)
	}
	return ps
}

// wantProblem fails unless ps has a problem with exactly key whose message
// contains every fragment.
func wantProblem(t *testing.T, ps Problems, key string, fragments ...string) {
	t.Helper()
	for _, p := range ps {
		if p.Key != key {
			continue
		}
		if slices.ContainsFunc(fragments, func(f string) bool { return !strings.Contains(p.Message, f) }) {
			continue
		}
		return
	}
	t.Errorf("no problem for key %q with %q; got:\n%v", key, fragments, ps)
}

// mapEnv returns a LookupEnv backed by m.
func mapEnv(m map[string]string) LookupEnv {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}
