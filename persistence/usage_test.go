package persistence_test

import (
	"testing"

	"github.com/lisabot/lisa/persistence"
)

func TestUsageLedgerSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := persistence.OpenBadger(dir, persistence.BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recs := []persistence.UsageRecord{
		{Day: "2026-12-06", Room: "!a:x", ID: "p-1", Event: "$1", Attempt: 1, PromptTokens: 100, CompletionTokens: 20},
		{Day: "2026-12-06", Room: "!a:x", ID: "p-2", Event: "$1", Attempt: 2, PromptTokens: 7, CompletionTokens: 3, Estimated: true},
		{Day: "2026-12-06", Room: "!b:x", ID: "p-3", Event: "$2", Attempt: 1, PromptTokens: 1, CompletionTokens: 1},
		{Day: "2026-12-07", Room: "!a:x", ID: "p-4", Event: "$3", Attempt: 1, PromptTokens: 5, CompletionTokens: 5},
	}
	for _, r := range append(recs, recs[0]) { // a record written twice counts once
		if err := s.RecordUsage(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordUsage(persistence.UsageRecord{Room: "!a:x", ID: "x"}); err == nil {
		t.Error("a record without a day was stored")
	}
	if mine, err := s.BudgetNotice("2026-12-06", "!a:x", "$1"); !mine || err != nil {
		t.Fatalf("first claim: %v, %v", mine, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = persistence.OpenBadger(dir, persistence.BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []persistence.UsageRecord
	if err := s.Usage("2026-12-06", func(r persistence.UsageRecord) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("records = %+v, want 3", got)
	}
	for i, r := range got {
		if r != recs[i] {
			t.Errorf("record %d = %+v, want %+v", i, r, recs[i])
		}
	}
	for _, c := range []struct {
		ev   string
		want bool
	}{{"$1", true}, {"$2", false}} {
		if mine, err := s.BudgetNotice("2026-12-06", "!a:x", c.ev); mine != c.want || err != nil {
			t.Errorf("claim by %s after reopen: %v, %v; want %v", c.ev, mine, err, c.want)
		}
	}
	if mine, _ := s.BudgetNotice("2026-12-07", "!a:x", "$2"); !mine {
		t.Error("the next day's notice was taken")
	}
}
