package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lisabot/lisa/adapters/admin"
	"github.com/lisabot/lisa/messages"
)

// logBuffer collects JSON log lines from concurrent goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the logged records as maps.
func (b *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(b.buf.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// fakeChecker answers per room; "slow" rooms block until their context
// ends. It records the most checks in flight at once.
type fakeChecker struct {
	encrypted, slow map[string]bool
	fail            map[string]error
	inFlight, peak  atomic.Int32
}

func (f *fakeChecker) RoomEncrypted(ctx context.Context, room string) (bool, error) {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
	}
	if f.slow[room] {
		<-ctx.Done()
		return false, &messages.Error{Code: messages.CodeShutdown, Message: "request cancelled", Ambiguous: true}
	}
	if err := f.fail[room]; err != nil {
		return false, err
	}
	return f.encrypted[room], nil
}

// TestEncryptionCheckAtStart (#17 item 9): every allowed room is checked,
// at most Workers at a time; an encrypted room is logged once at error
// level with the operator's wording and the room ID as configured; a
// check that fails or outlives its time limit is a warning and the
// others go on.
func TestEncryptionCheckAtStart(t *testing.T) {
	var logs logBuffer
	enc := newEncryptedRooms(slog.New(slog.NewJSONHandler(&logs, nil)))
	c := &fakeChecker{
		encrypted: map[string]bool{"!enc1:hs": true, "!enc2:hs": true},
		slow:      map[string]bool{"!slow:hs": true},
		fail:      map[string]error{"!fail:hs": &messages.Error{Code: messages.CodeMatrixForbidden, Message: "homeserver refused (403 M_FORBIDDEN)", Permanent: true}},
	}
	rooms := []string{"!enc1:hs", "!plain1:hs", "!fail:hs", "!slow:hs", "!enc2:hs", "!plain2:hs", "!plain3:hs", "!plain4:hs"}
	sum := enc.check(context.Background(), c, rooms, encryptionLimits{Workers: 3, PerRoom: 200 * time.Millisecond, Total: time.Minute})
	if want := (encryptionSummary{Plain: 4, Encrypted: 2, Failed: 2}); sum != want {
		t.Errorf("summary %+v, want %+v", sum, want)
	}
	if p := c.peak.Load(); p > 3 {
		t.Errorf("%d checks at once, want at most 3", p)
	}
	enc.Mark("!enc1:hs", "sync") // known: no second error line
	if got := enc.list(); !reflect.DeepEqual(got, []string{"!enc1:hs", "!enc2:hs"}) {
		t.Errorf("encrypted rooms %v", got)
	}
	var errorsLogged []string
	warned := map[string]bool{}
	for _, r := range logs.records(t) {
		switch r["level"] {
		case "ERROR":
			errorsLogged = append(errorsLogged, r["msg"].(string))
			if r["code"] != "matrix_room_encrypted" || r["found_by"] != "start-up check" {
				t.Errorf("error record %v", r)
			}
		case "WARN":
			warned[r["room"].(string)] = true
		}
	}
	slices.Sort(errorsLogged)
	want := []string{"room !enc1:hs is encrypted; Lisa cannot read it", "room !enc2:hs is encrypted; Lisa cannot read it"}
	if !reflect.DeepEqual(errorsLogged, want) {
		t.Errorf("error lines %q, want %q", errorsLogged, want)
	}
	if len(warned) != 2 || !warned[messages.Hash("!fail:hs")] || !warned[messages.Hash("!slow:hs")] {
		t.Errorf("warnings for rooms %v, want the failing and the slow room", warned)
	}
}

// TestEncryptionCheckIsBounded: the whole check ends when its time is
// spent, however slow the homeserver, with no more requests at once than
// its workers; the rooms left are counted as
// unchecked and a warning says so. A check cut short by Lisa stopping
// ends at once and says nothing.
func TestEncryptionCheckIsBounded(t *testing.T) {
	var logs logBuffer
	enc := newEncryptedRooms(slog.New(slog.NewJSONHandler(&logs, nil)))
	slow := map[string]bool{}
	var rooms []string
	for _, r := range []string{"!a:hs", "!b:hs", "!c:hs", "!d:hs", "!e:hs"} {
		slow[r] = true
		rooms = append(rooms, r)
	}
	c := &fakeChecker{slow: slow}
	start := time.Now()
	sum := enc.check(context.Background(), c, rooms, encryptionLimits{Workers: 2, PerRoom: time.Hour, Total: 300 * time.Millisecond})
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("check took %v, limit 300ms", took)
	}
	if sum != (encryptionSummary{Unchecked: 5}) {
		t.Errorf("summary %+v", sum)
	}
	if p := c.peak.Load(); p != 2 {
		t.Errorf("%d checks at once, want 2 (the workers)", p)
	}
	if !strings.Contains(logs.buf.String(), "ran out of time") {
		t.Errorf("no warning about the time limit:\n%s", logs.buf.String())
	}

	logs.buf.Reset()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if sum := enc.check(ctx, c, rooms, encryptionLimits{Workers: 2, PerRoom: time.Hour, Total: time.Hour}); sum.Unchecked != 5 {
		t.Errorf("stopped check: %+v", sum)
	}
	if logs.buf.Len() != 0 {
		t.Errorf("a stopped check logged:\n%s", logs.buf.String())
	}
}

// TestHealthReportsEncryptedRooms: with an encrypted allowed room, the
// health answer is degraded with the operator's line as a reason and the
// room listed; without one it is left as it was; other commands and
// errors pass through.
func TestHealthReportsEncryptedRooms(t *testing.T) {
	enc := newEncryptedRooms(slog.New(slog.DiscardHandler))
	next := admin.HandlerFunc(func(_ context.Context, cmd string, _ []string) (any, error) {
		switch cmd {
		case "health":
			return HealthReport{Status: "healthy", RoomsRunning: 2}, nil
		case "rooms":
			return []RoomRow{{Room: "!enc:hs"}}, nil
		}
		return nil, errors.New("unknown command")
	})
	h := enc.middleware(next)
	health := func() HealthReport {
		t.Helper()
		v, err := h.Handle(context.Background(), "health", nil)
		if err != nil {
			t.Fatal(err)
		}
		return v.(HealthReport)
	}
	if r := health(); r.Status != "healthy" || len(r.Reasons) != 0 || r.EncryptedRooms != nil {
		t.Fatalf("no encrypted room: %+v", r)
	}
	enc.Mark("!enc:hs", "start-up check")
	r := health()
	if r.Status != "degraded" || !reflect.DeepEqual(r.Reasons, []string{"room !enc:hs is encrypted; Lisa cannot read it"}) ||
		!reflect.DeepEqual(r.EncryptedRooms, []string{"!enc:hs"}) || r.RoomsRunning != 2 {
		t.Fatalf("encrypted room: %+v", r)
	}
	if v, err := h.Handle(context.Background(), "rooms", nil); err != nil || len(v.([]RoomRow)) != 1 {
		t.Fatalf("rooms: %v %v", v, err)
	}
	if _, err := h.Handle(context.Background(), "bogus", nil); err == nil {
		t.Fatal("an error was swallowed")
	}
}
