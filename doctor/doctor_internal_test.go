package doctor

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestReportCode(t *testing.T) {
	for _, c := range []struct {
		statuses []Status
		code     int
	}{
		{nil, ExitOK},
		{[]Status{OK, OK}, ExitOK},
		{[]Status{OK, Warning}, ExitWarnings},
		{[]Status{Warning, Failed, OK}, ExitFailed},
		{[]Status{OK, Skipped}, ExitFailed}, // a skip stands for a failure
	} {
		var rep Report
		for _, s := range c.statuses {
			rep.Results = append(rep.Results, Result{Status: s})
		}
		if got := rep.Code(); got != c.code {
			t.Errorf("%v: exit %d, want %d", c.statuses, got, c.code)
		}
	}
}

func TestClassifyFS(t *testing.T) {
	for _, c := range []struct {
		magic uint32
		name  string
		kind  fsKind
	}{
		{0xEF53, "ext2/3/4", fsLocal},
		{0x01021994, "tmpfs", fsVolatile},
		{0x4D44, "vfat", fsUnordered},
		{0x58465342, "xfs", fsLocal},
		{0x6969, "nfs", fsNetwork},
		{0xFF534D42, "cifs", fsNetwork},
		{0xFE534D42, "smb2", fsNetwork},
		{0x517B, "smb", fsNetwork},
		{0x65735546, "fuse", fsUserspace},
		{0x12345678, "filesystem type 0x12345678", fsUnordered},
	} {
		if got := classifyFS(c.magic); got.name != c.name || got.kind != c.kind {
			t.Errorf("0x%X: %+v, want %s kind %d", c.magic, got, c.name, c.kind)
		}
	}
}

// TestScrub: secret values and control characters never reach a line.
func TestScrub(t *testing.T) {
	r := scrub(Result{Message: "token syt_abcdef in \x1b[31mred\x1b[0m", Fix: "key sk-12345678"}, []string{"syt_abcdef", "sk-12345678", ""})
	if r.Message != "token [REDACTED] in ?[31mred?[0m" || r.Fix != "key [REDACTED]" {
		t.Fatalf("%+v", r)
	}
}

// TestStuckCheckIsAbandoned: a check that ignores its context is reported
// failed soon after its limit, and the section goes on.
func TestStuckCheckIsAbandoned(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s := Section{Name: "x", Checks: []Check{
		{Name: "stuck", Timeout: func(*Env) time.Duration { return 100 * time.Millisecond },
			Run: func(context.Context, *Env) []Result { <-release; return nil }},
		{Name: "fine", Run: func(context.Context, *Env) []Result { return []Result{{Status: OK, Message: "fine"}} }},
		{Name: "panics", Run: func(context.Context, *Env) []Result { panic("boom") }},
	}}
	start := time.Now()
	got := runSection(context.Background(), &Env{}, s)
	if took := time.Since(start); took > 100*time.Millisecond+abandonAfter+time.Second {
		t.Fatalf("took %v", took)
	}
	if len(got) != 3 || got[0].Status != Failed || !strings.Contains(got[0].Message, "the stuck check did not finish within 100ms") ||
		got[1].Message != "fine" || got[2].Status != Failed || !strings.Contains(got[2].Message, "crashed") || got[1].Section != "x" {
		t.Fatalf("%+v", got)
	}
}

func TestSelectSections(t *testing.T) {
	got, err := selectSections(Sections(), []string{"llm", " rooms"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"rooms", "llm"}) {
		t.Fatalf("report order: %v", names)
	}
	if _, err := selectSections(Sections(), []string{"dns"}); !errors.Is(err, ErrUnknownSection) {
		t.Fatalf("unknown: %v", err)
	}
	if !slices.Equal(SectionNames(), []string{"config", "homeserver", "rooms", "llm", "search", "converter", "datadir", "admin"}) {
		t.Fatalf("sections: %v", SectionNames())
	}
}
