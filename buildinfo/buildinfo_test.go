package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	cases := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want Info
		line string
	}{
		{
			name: "no build info",
			ok:   false,
			want: Info{Version: Unknown, Revision: Unknown, Time: Unknown, GoVersion: Unknown},
			line: "lisa unknown revision unknown, committed unknown, built with unknown",
		},
		{
			name: "stamped clean build",
			ok:   true,
			bi: &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/lisabot/lisa", Version: "v0.3.1"},
				Settings: []debug.BuildSetting{
					{Key: "CGO_ENABLED", Value: "0"},
					{Key: "vcs", Value: "git"},
					{Key: "vcs.revision", Value: rev},
					{Key: "vcs.time", Value: "2026-12-06T14:00:00Z"},
					{Key: "vcs.modified", Value: "false"},
				}},
			want: Info{Version: "v0.3.1", Revision: rev, Time: "2026-12-06T14:00:00Z", GoVersion: "go1.26.0"},
			line: "lisa v0.3.1 revision " + rev + ", committed 2026-12-06T14:00:00Z, built with go1.26.0",
		},
		{
			name: "modified work tree",
			ok:   true,
			bi: &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20261206140000-0123456789ab+dirty"},
				Settings: []debug.BuildSetting{
					{Key: "vcs.revision", Value: rev},
					{Key: "vcs.time", Value: "2026-12-06T14:00:00Z"},
					{Key: "vcs.modified", Value: "true"},
				}},
			want: Info{Version: "v0.0.0-20261206140000-0123456789ab+dirty", Revision: rev, Time: "2026-12-06T14:00:00Z", Modified: true, GoVersion: "go1.26.0"},
			line: "lisa v0.0.0-20261206140000-0123456789ab+dirty revision " + rev + " (modified), committed 2026-12-06T14:00:00Z, built with go1.26.0",
		},
		{
			name: "built without VCS stamping",
			ok:   true,
			bi:   &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			want: Info{Version: "(devel)", Revision: Unknown, Time: Unknown, GoVersion: "go1.26.0"},
			line: "lisa (devel) revision unknown, committed unknown, built with go1.26.0",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := From(c.bi, c.ok)
			if got != c.want {
				t.Fatalf("From = %+v, want %+v", got, c.want)
			}
			if s := got.String(); s != c.line {
				t.Errorf("String = %q, want %q", s, c.line)
			}
		})
	}
}

func TestShortRevision(t *testing.T) {
	for _, c := range []struct{ rev, want string }{
		{"0123456789abcdef0123", "0123456789ab"},
		{"abc", "abc"},
		{Unknown, Unknown},
	} {
		if got := (Info{Revision: c.rev}).ShortRevision(); got != c.want {
			t.Errorf("ShortRevision(%q) = %q, want %q", c.rev, got, c.want)
		}
	}
}

// TestRead checks the test binary's own info: it always has a Go version.
func TestRead(t *testing.T) {
	if got := Read(); got.GoVersion == Unknown || got.GoVersion == "" {
		t.Fatalf("Read().GoVersion = %q", got.GoVersion)
	}
}
