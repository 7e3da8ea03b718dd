package persistence_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/persistence"
)

// retentionClock is a settable clock for the store and the sweeper.
type retentionClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *retentionClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *retentionClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

const (
	rtRoom = "!retention:lisa.test"
	rtKeep = 30 * 24 * time.Hour
	day    = 24 * time.Hour
)

var rtStart = time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)

func cand(ev string, at time.Time) *roompb.Candidate {
	return &roompb.Candidate{RoomId: rtRoom, EventId: ev, Sender: "@alice:lisa.test", OriginTsMs: at.UnixMilli(), Body: "lisa: " + ev}
}

func routedCount(t *testing.T, s *persistence.Badger, cur string, cs ...*roompb.Candidate) int {
	t.Helper()
	acc, err := s.CommitSync(&roompb.SyncCursor{NextBatch: cur, BaselineDone: true}, cs)
	must(t, err)
	return len(acc)
}

func keys(t *testing.T, s *persistence.Badger, kind byte) int {
	t.Helper()
	n, err := persistence.KeysForTest(s, kind)
	must(t, err)
	return n
}

func routed(t *testing.T, s *persistence.Badger, ev string) bool {
	t.Helper()
	ok, err := s.Routed(rtRoom, ev)
	must(t, err)
	return ok
}

// sweepAll runs passes of limit until one is done and returns their sum
// and how many passes it took.
func sweepAll(t *testing.T, s *persistence.Badger, now time.Time, limit int) (persistence.SweepResult, int) {
	t.Helper()
	var sum persistence.SweepResult
	for pass := 1; pass <= 1000; pass++ {
		res, err := s.SweepRetention(now, limit)
		must(t, err)
		sum.Markers += res.Markers
		sum.Usage += res.Usage
		sum.Notices += res.Notices
		sum.Floor = res.Floor
		if res.Done {
			return sum, pass
		}
	}
	t.Fatal("the sweep never finished")
	return sum, 0
}

// TestRetentionSweep: on a Badger store on disk, the routed markers,
// usage records and budget notices older than the retention go, in
// bounded passes; recent ones stay, and so does the marker of an old
// event still in its inbox. A question Lisa answered is still known as
// routed by her reply (Routed, RepliedTo), which is never swept.
func TestRetentionSweep(t *testing.T) {
	clock := &retentionClock{now: rtStart}
	dir := t.TempDir()
	s, err := persistence.OpenBadger(dir, persistence.BadgerOptions{Now: clock.Now, Retention: rtKeep})
	must(t, err)
	defer s.Close()

	// Forty days ago: 50 questions taken in, one answered, one still in
	// the inbox; their usage and budget notices.
	const old = 50
	var olds []*roompb.Candidate
	for i := range old {
		olds = append(olds, cand(fmt.Sprintf("$old%02d", i), rtStart))
	}
	olds = append(olds, cand("$oldpending", rtStart))
	if n := routedCount(t, s, "s1", olds...); n != old+1 {
		t.Fatalf("%d old routed", n)
	}
	for _, c := range olds[:old] {
		must(t, s.RemoveInbox(rtRoom, c.GetEventId()))
	}
	must(t, s.RecordBotEvent(rtRoom, "$reply00", "$old00"))
	oldDay := rtStart.Format(time.DateOnly)
	for i := range 3 {
		must(t, s.RecordUsage(persistence.UsageRecord{Day: oldDay, Room: rtRoom, ID: fmt.Sprintf("old-%d", i), Event: "$old00", PromptTokens: 10}))
	}
	if mine, err := s.BudgetNotice(oldDay, rtRoom, "$old01"); err != nil || !mine {
		t.Fatalf("old notice: %v %v", mine, err)
	}

	// Forty days later: recent questions, usage and a notice.
	now := rtStart.Add(40 * day)
	clock.Set(now)
	recent := []*roompb.Candidate{cand("$new1", now.Add(-time.Hour)), cand("$new2", now.Add(-29*day))}
	if n := routedCount(t, s, "s2", recent...); n != 2 {
		t.Fatalf("%d recent routed", n)
	}
	newDay := now.Format(time.DateOnly)
	must(t, s.RecordUsage(persistence.UsageRecord{Day: newDay, Room: rtRoom, ID: "new-1", Event: "$new1", PromptTokens: 10}))
	must(t, s.RecordUsage(persistence.UsageRecord{Day: now.Add(-29 * day).Format(time.DateOnly), Room: rtRoom, ID: "new-2", Event: "$new2", PromptTokens: 10}))
	if mine, err := s.BudgetNotice(newDay, rtRoom, "$new1"); err != nil || !mine {
		t.Fatalf("new notice: %v %v", mine, err)
	}

	kl, vl, err := persistence.MarkerBytesForTest(s, rtRoom, "$new1")
	must(t, err)
	beforeN, beforeU, beforeV := keys(t, s, 'n'), keys(t, s, 'u'), keys(t, s, 'v')
	t.Logf("a routed marker here: %d B of key + %d B of value; before the sweep: %d markers, %d usage records, %d budget notices",
		kl, vl, beforeN, beforeU, beforeV)

	sum, passes := sweepAll(t, s, now, 8)
	afterN, afterU, afterV := keys(t, s, 'n'), keys(t, s, 'u'), keys(t, s, 'v')
	t.Logf("after the sweep (%d passes of at most 8 keys): %d markers, %d usage records, %d budget notices", passes, afterN, afterU, afterV)
	if passes < old/8 {
		t.Errorf("%d passes for %d markers at 8 a pass: a pass is not bounded", passes, beforeN)
	}
	if sum.Markers != old || sum.Usage != 3 || sum.Notices != 1 {
		t.Errorf("removed %+v, want %d markers, 3 usage records, 1 notice", sum, old)
	}
	if afterN != 3 || afterU != 2 || afterV != 1 {
		t.Errorf("left %d markers, %d usage, %d notices; want 3 (two recent, one pending), 2, 1", afterN, afterU, afterV)
	}
	if want := now.Add(-rtKeep); !sum.Floor.Equal(want) {
		t.Errorf("floor %v, want %v", sum.Floor, want)
	}
	for ev, want := range map[string]bool{"$old00": true, "$old01": false, "$old49": false, "$oldpending": true, "$new1": true, "$new2": true} {
		if got := routed(t, s, ev); got != want {
			t.Errorf("Routed(%s) = %v, want %v", ev, got, want)
		}
	}
	if reply, err := s.RepliedTo(rtRoom, "$old00"); err != nil || reply != "$reply00" {
		t.Errorf("RepliedTo after the sweep: %q %v", reply, err)
	}
	inbox, err := s.Inbox(rtRoom)
	must(t, err)
	if len(inbox) != 3 || inbox[0].GetEventId() != "$oldpending" {
		t.Errorf("inbox %v", inbox)
	}
	// The pending entry can still be taken in: its marker names it.
	must(t, s.RemoveInbox(rtRoom, "$oldpending"))
	if inbox, _ := s.Inbox(rtRoom); len(inbox) != 2 {
		t.Errorf("inbox after taking the old entry in: %v", inbox)
	}
	var usage []string
	for _, d := range []string{oldDay, newDay} {
		must(t, s.Usage(d, func(r persistence.UsageRecord) error { usage = append(usage, r.ID); return nil }))
	}
	if strings.Join(usage, ",") != "new-1" {
		t.Errorf("usage of the old and the new day: %v", usage)
	}
	if mine, err := s.BudgetNotice(newDay, rtRoom, "$other"); err != nil || mine {
		t.Errorf("today's notice claimed again: %v %v", mine, err)
	}
	// The next sweep removes the marker of the entry just taken in, and
	// nothing else.
	if again, _ := sweepAll(t, s, now, 8); again.Markers != 1 || again.Usage+again.Notices != 0 || routed(t, s, "$oldpending") {
		t.Errorf("second sweep removed %+v", again)
	}
}

// TestSweptEventIsNotRoutedAgain: an event older than the retention that
// is delivered again after its marker was swept (a redelivery, a
// back-fill, a replay after a restore) is not routed, so no room is
// nudged and nothing answers it; even after the clock steps back past the
// retention, since the floor is stored. An old event never seen before is
// not routed either, a recent one is, once.
func TestSweptEventIsNotRoutedAgain(t *testing.T) {
	clock := &retentionClock{now: rtStart}
	dir := t.TempDir()
	s, err := persistence.OpenBadger(dir, persistence.BadgerOptions{Now: clock.Now, Retention: rtKeep})
	must(t, err)
	q := cand("$question", rtStart)
	if n := routedCount(t, s, "s1", q); n != 1 {
		t.Fatalf("%d routed", n)
	}
	must(t, s.RemoveInbox(rtRoom, "$question"))
	now := rtStart.Add(rtKeep + day)
	clock.Set(now)
	if sum, _ := sweepAll(t, s, now, persistence.DefaultSweepLimit); sum.Markers != 1 {
		t.Fatalf("swept %+v", sum)
	}
	if routed(t, s, "$question") {
		t.Fatal("the marker is still there")
	}
	must(t, s.Close())

	// A restart, then the clock steps back by 20 days: the stored floor
	// still refuses the swept event.
	for _, at := range []time.Time{now, now.Add(-20 * day)} {
		clock.Set(at)
		s, err = persistence.OpenBadger(dir, persistence.BadgerOptions{Now: clock.Now, Retention: rtKeep})
		must(t, err)
		if n := routedCount(t, s, "s2", q); n != 0 {
			t.Errorf("at %v: the swept question was routed again", at)
		}
		must(t, s.Close())
	}
	clock.Set(now)
	var logs bytes.Buffer
	s, err = persistence.OpenBadger(dir, persistence.BadgerOptions{Now: clock.Now, Retention: rtKeep, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	must(t, err)
	defer s.Close()
	for _, c := range []struct {
		what string
		c    *roompb.Candidate
		want int
	}{
		{"an old event never routed", cand("$unseen-old", now.Add(-rtKeep-time.Minute)), 0},
		{"an event without a timestamp", &roompb.Candidate{RoomId: rtRoom, EventId: "$no-ts"}, 0},
		{"a recent event", cand("$recent", now.Add(-time.Minute)), 1},
		{"the recent event again", cand("$recent", now.Add(-time.Minute)), 0},
	} {
		if n := routedCount(t, s, "s3", c.c); n != c.want {
			t.Errorf("%s: %d routed, want %d", c.what, n, c.want)
		}
	}
	inbox, err := s.Inbox(rtRoom)
	must(t, err)
	if len(inbox) != 1 || inbox[0].GetEventId() != "$recent" {
		t.Errorf("inbox %v: only the recent event may wait for an answer", inbox)
	}
	if n := strings.Count(logs.String(), `"code":"event_too_old"`); n != 2 || strings.Contains(logs.String(), "$unseen-old") {
		t.Errorf("%d event_too_old lines (want 2, IDs hashed): %s", n, logs.String())
	}
}

// TestRetentionFromFormat2: a data dir of format 2 (markers without a
// time) migrates with every marker timed at the upgrade: a sweep keeps
// them for a whole retention from then, and removes them after (not the
// one whose entry is pending); the fixture's answered question, delivered
// again, is not routed either way.
func TestRetentionFromFormat2(t *testing.T) {
	dir := unpackFixture(t, fixtureName(2))
	upgrade := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	clock := &retentionClock{now: upgrade}
	s, err := persistence.OpenBadger(dir, persistence.BadgerOptions{Now: clock.Now, Retention: rtKeep})
	must(t, err)
	defer s.Close()
	again := []*roompb.Candidate{{RoomId: fxRoom, EventId: fxAnswered, OriginTsMs: 1764547200000}}
	for _, c := range []struct {
		at      time.Time
		markers int
	}{
		{upgrade.Add(rtKeep - time.Hour), 2},
		{upgrade.Add(rtKeep + time.Hour), 1},
	} {
		clock.Set(c.at)
		if _, _ = sweepAll(t, s, c.at, 10); keys(t, s, 'n') != c.markers {
			t.Errorf("at upgrade+%v: %d markers, want %d", c.at.Sub(upgrade), keys(t, s, 'n'), c.markers)
		}
		acc, err := s.CommitSync(&roompb.SyncCursor{NextBatch: fxBatch, BaselineDone: true}, again)
		if err != nil || len(acc) != 0 {
			t.Errorf("at upgrade+%v: the answered question routed again: %v %v", c.at.Sub(upgrade), acc, err)
		}
	}
	// Pending is kept (its entry waits), answered is gone but still known
	// as answered, and the fixture's usage (1 December) and notice went.
	if ok, _ := s.Routed(fxRoom, fxPending); !ok {
		t.Error("the pending question's marker went")
	}
	if reply, err := s.RepliedTo(fxRoom, fxAnswered); err != nil || reply != fxReply {
		t.Errorf("RepliedTo: %q %v", reply, err)
	}
	if keys(t, s, 'u') != 0 || keys(t, s, 'v') != 0 {
		t.Errorf("%d usage records, %d notices left", keys(t, s, 'u'), keys(t, s, 'v'))
	}
}

// TestSweeperPasses: the sweeper runs one bounded pass at a time on its
// injected clock, the next soon while there is more, the next sweep an
// hour later, logs what a whole sweep removed, and stops.
func TestSweeperPasses(t *testing.T) {
	clock := &retentionClock{now: rtStart}
	s, err := persistence.OpenBadger(t.TempDir(), persistence.BadgerOptions{Now: clock.Now, Retention: rtKeep})
	must(t, err)
	defer s.Close()
	var cs []*roompb.Candidate
	for i := range 5 {
		cs = append(cs, cand(fmt.Sprintf("$e%d", i), rtStart))
	}
	routedCount(t, s, "s1", cs...)
	for _, c := range cs {
		must(t, s.RemoveInbox(rtRoom, c.GetEventId()))
	}
	clock.Set(rtStart.Add(rtKeep + day))

	var (
		mu     sync.Mutex
		timers []time.Duration
		due    []func()
	)
	after := func(d time.Duration, f func()) func() bool {
		mu.Lock()
		defer mu.Unlock()
		timers, due = append(timers, d), append(due, f)
		return func() bool { return true }
	}
	next := func() func() {
		mu.Lock()
		defer mu.Unlock()
		f := due[len(due)-1]
		due = due[:len(due)-1]
		return f
	}
	var logs bytes.Buffer
	w := persistence.StartSweeper(s, persistence.SweeperOptions{Limit: 2, Now: clock.Now, AfterFunc: after,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	for range 3 { // 5 markers, 2 a pass: the third pass ends the sweep
		next()()
	}
	w.Stop()
	if got, want := fmt.Sprint(timers), fmt.Sprint([]time.Duration{0, time.Second, time.Second, time.Hour}); got != want {
		t.Errorf("timers %s, want %s", got, want)
	}
	if keys(t, s, 'n') != 0 {
		t.Errorf("%d markers left", keys(t, s, 'n'))
	}
	if !strings.Contains(logs.String(), `"msg":"retention sweep done","code":"retention_sweep","routed_markers_removed":5`) {
		t.Errorf("log: %s", logs.String())
	}
	next()() // after Stop: nothing runs, nothing is armed
	if len(timers) != 4 {
		t.Errorf("a pass ran after Stop: %v", timers)
	}
}
