package buildinfo

import (
	"fmt"
	"runtime/debug"
)

// Unknown stands for a field the binary does not record (a binary built
// without VCS stamping, or a test binary).
const Unknown = "unknown"

// Info is what a binary says about its own build.
type Info struct {
	// Version is the main module's version: a tag (v1.2.3), a pseudo-version
	// the toolchain derived from the VCS, or "(devel)".
	Version string `json:"version"`
	// Revision is the VCS revision (the full commit hash).
	Revision string `json:"revision"`
	// Time is the commit time of Revision (RFC 3339), as the VCS gave it.
	Time string `json:"time"`
	// Modified says the work tree had uncommitted changes at build time.
	Modified bool `json:"modified"`
	// GoVersion is the toolchain that built the binary (go1.26.0).
	GoVersion string `json:"go_version"`
}

// Read returns the running binary's build info.
func Read() Info { return From(debug.ReadBuildInfo()) }

// From turns what [debug.ReadBuildInfo] returns into an Info; fields the
// build did not record are [Unknown].
func From(bi *debug.BuildInfo, ok bool) Info {
	in := Info{Version: Unknown, Revision: Unknown, Time: Unknown, GoVersion: Unknown}
	if !ok || bi == nil {
		return in
	}
	if bi.Main.Version != "" {
		in.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		in.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if s.Value != "" {
				in.Revision = s.Value
			}
		case "vcs.time":
			if s.Value != "" {
				in.Time = s.Value
			}
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// ShortRevision is the first 12 characters of the revision (or all of it).
func (i Info) ShortRevision() string {
	if len(i.Revision) > 12 {
		return i.Revision[:12]
	}
	return i.Revision
}

// String is the one line `lisa version` prints.
func (i Info) String() string {
	mod := ""
	if i.Modified {
		mod = " (modified)"
	}
	return fmt.Sprintf("lisa %s revision %s%s, committed %s, built with %s", i.Version, i.Revision, mod, i.Time, i.GoVersion)
}

// LogAttrs are the key-value pairs of the start-up log line.
func (i Info) LogAttrs() []any {
	return []any{"version", i.Version, "revision", i.Revision, "vcs_time", i.Time, "modified", i.Modified, "go_version", i.GoVersion}
}
