package app_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/testkit/fakehs"
)

// These tests run the room actors with Lisa's real Matrix client against
// the fake homeserver's modes of docs/homeservers.md ("Differences → what
// Lisa must do → fake-homeserver mode").

const fakeBot, fakeDevice, fakeToken = "@lisa:hs", "LISA", "fake-token"

// fakeHS starts a fake homeserver with roomA and returns it with Lisa's
// client connected to it.
func fakeHS(t *testing.T, o fakehs.Options) (*fakehs.Server, *matrix.Client) {
	t.Helper()
	o.UserID, o.DeviceID, o.Token = fakeBot, fakeDevice, fakeToken
	hs := fakehs.New(o)
	if err := hs.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hs.Close)
	hs.CreateRoom(roomA, map[string]string{"@human:hs": "Human"})
	cli, err := matrix.Connect(context.Background(), hs.URL(), fakeBot, fakeDevice, fakeToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	return hs, cli
}

// replies counts Lisa's events in roomA.
func replies(hs *fakehs.Server) int {
	n := 0
	for _, e := range hs.Events(roomA) {
		if e.Sender == fakeBot {
			n++
		}
	}
	return n
}

// noLookup is a Lisa that trusts the transaction ID and never looks for
// her earlier reply: the hazard each test shows its scenario would
// duplicate, so that it notices if the fake stops producing it.
type noLookup struct{ *matrix.Client }

func (noLookup) FindReply(context.Context, string, string, string) (string, bool, error) {
	return "", false, nil
}

// TestSendInDoubtAgainstFakeHomeserver: a reply stored while its send
// failed is found by the lookup before the resend, whatever the server
// did with the transaction ID — and with txn IDs trusted to survive
// (matrix.txn_ids_survive_restart = "yes", TxnIDRetention), where the
// resend is not held. Continuwuity's crash window (the event stored, the
// mapping not: StoreNoMapping*) duplicates without the lookup although
// its txn IDs survive restarts; so does Dendrite's restart (mapping
// forgotten). Only a mapping that is kept saves a Lisa without lookup.
func TestSendInDoubtAgainstFakeHomeserver(t *testing.T) {
	for _, c := range []struct {
		name    string
		txn     fakehs.TxnPolicy
		fault   fakehs.SendFault
		restart bool
		// hazard: Lisa without the lookup; want is the replies expected.
		hazard bool
		want   int
	}{
		{"Continuwuity error after the append (500)", fakehs.TxnPolicy{}, fakehs.StoreNoMappingThen500, false, false, 1},
		{"hazard: the same without the lookup", fakehs.TxnPolicy{}, fakehs.StoreNoMappingThen500, false, true, 2},
		{"Continuwuity killed between append and mapping, restart", fakehs.TxnPolicy{}, fakehs.StoreNoMappingThenClose, true, false, 1},
		{"hazard: the same without the lookup ", fakehs.TxnPolicy{}, fakehs.StoreNoMappingThenClose, true, true, 2},
		{"answer lost, Synapse-like restart keeps the mapping", fakehs.TxnPolicy{}, fakehs.StoreThenClose, true, false, 1},
		{"answer lost, kept mapping saves even a Lisa without lookup", fakehs.TxnPolicy{}, fakehs.StoreThenClose, true, true, 1},
		{"answer lost, Dendrite-like restart forgets", fakehs.TxnPolicy{ForgetOnRestart: true}, fakehs.StoreThenClose, true, false, 1},
		{"hazard: forgotten mapping without the lookup", fakehs.TxnPolicy{ForgetOnRestart: true}, fakehs.StoreThenClose, true, true, 2},
		{"answer lost, mapping expired (Synapse 24 h)", fakehs.TxnPolicy{Expiry: time.Nanosecond}, fakehs.StoreThenClose, false, false, 1},
		{"hazard: expired mapping without the lookup", fakehs.TxnPolicy{Expiry: time.Nanosecond}, fakehs.StoreThenClose, false, true, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			var once sync.Once
			var hs *fakehs.Server
			restarted := make(chan struct{})
			hs, cli := fakeHS(t, fakehs.Options{Txn: c.txn, OnSend: func(fakehs.Send) {
				if c.restart {
					once.Do(func() {
						go func() {
							defer close(restarted)
							// After the fault dropped the connection.
							for hs.Counts()["send_fault"] == 0 {
								time.Sleep(time.Millisecond)
							}
							if err := hs.Restart(); err != nil {
								t.Error(err)
							}
						}()
					})
				}
			}})
			hs.FailSends(1, c.fault)
			h := newHarness(t, roomA)
			h.settle, h.txnRetention = 50*time.Millisecond, 23*time.Hour
			h.send = cli
			if c.hazard {
				h.send = noLookup{cli}
			}
			h.start()
			h.enqueue(roomA, "$q1")
			h.waitFor("answered", h.answered(roomA, 1))
			if c.restart {
				<-restarted
			}
			if got := replies(hs); got != c.want {
				t.Fatalf("%d replies in the room (%v), want %d", got, hs.Counts(), c.want)
			}
		})
	}
}

// TestRateLimitedRepliesAgainstFakeHomeserver: replies refused by a token
// bucket (Synapse's rc_message) are sent again after retry_after_ms, none
// dropped, with one refusal per reply beyond the burst at most; without
// retry_after_ms (a proxy's 429) the send backoff's floor spaces them, so
// the refusals stay few.
func TestRateLimitedRepliesAgainstFakeHomeserver(t *testing.T) {
	const questions, burst, perSecond = 6, 2, 10.0
	for _, c := range []struct {
		name      string
		omit      bool
		max429    int
		base, cap time.Duration
	}{
		// Each reply past the burst waits exactly what the server said:
		// one refusal each.
		{"with retry_after_ms", false, questions - burst, 0, 0},
		// A floor of 100 ms is the refill time: a refusal at most every
		// floor, doubling to 400 ms.
		{"without retry_after_ms", true, 2 * (questions - burst), 100 * time.Millisecond, 400 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var at []time.Time
			hs, cli := fakeHS(t, fakehs.Options{
				SendRateLimit: &fakehs.RateLimit{PerSecond: perSecond, Burst: burst, OmitRetryAfter: c.omit},
				OnSend: func(s fakehs.Send) {
					mu.Lock()
					at = append(at, s.At)
					mu.Unlock()
				},
			})
			h := newHarness(t, roomA)
			h.send, h.sendRetryBase, h.sendRetryMax = cli, c.base, c.cap
			if c.base == 0 {
				// With retry_after_ms the base must not matter.
				h.sendRetryBase, h.sendRetryMax = time.Millisecond, time.Second
			}
			h.start()
			var ids []string
			for i := range questions {
				ids = append(ids, "$q"+string(rune('a'+i)))
			}
			h.enqueue(roomA, ids...)
			h.waitFor("answered", h.answered(roomA, questions))
			n := hs.Counts()
			if got := replies(hs); got != questions {
				t.Fatalf("%d replies for %d questions (%v)", got, questions, n)
			}
			if n["send_429"] > c.max429 || n["send"] != questions+n["send_429"] {
				t.Fatalf("%d sends, %d refused: want at most %d refusals and no other send", n["send"], n["send_429"], c.max429)
			}
			mu.Lock()
			defer mu.Unlock()
			// Past the burst, the stored sends took the refill time (less
			// what refilled while the first were made; arrival times
			// jitter by a few ms around the bucket's).
			span, want := at[len(at)-1].Sub(at[burst-1]), time.Duration(float64(questions-burst-1)/perSecond*float64(time.Second))
			if span < want-20*time.Millisecond {
				t.Fatalf("the sends past the burst took %s, want about %s", span, want)
			}
		})
	}
}

// TestAbandonedSendFinishedLater: Continuwuity finishes a send whose
// client gave up (DelaySends: stored 1 s later while Lisa's sends time
// out after 200 ms). With no late-store hold, the settle delay and the
// lookups miss and Lisa sends again with the same transaction ID; the
// server's room lock makes that retry wait for the first request and
// return its event: one reply. A server that looks the transaction ID up
// before its lock (Dendrite's SendEvent) turns the same retry into a
// second reply — the hazard that keeps the hold for Dendrite.
func TestAbandonedSendFinishedLater(t *testing.T) {
	for _, c := range []struct {
		name  string
		early bool
		want  int
	}{
		{"lookup under the room lock (Continuwuity)", false, 1},
		{"hazard: lookup before the lock (Dendrite)", true, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			hs, cli := fakeHS(t, fakehs.Options{Txn: fakehs.TxnPolicy{LookupBeforeLock: c.early}})
			hs.DelaySends(1, time.Second)
			h := newHarness(t, roomA)
			h.send, h.settle, h.sendTimeout = cli, 100*time.Millisecond, 200*time.Millisecond
			h.start()
			h.enqueue(roomA, "$q1")
			h.waitFor("answered", h.answered(roomA, 1))
			// The first request may store after Lisa's answer was
			// recorded (the hazard's second reply came first).
			time.Sleep(1200 * time.Millisecond)
			if n := hs.Counts()["send"]; n < 2 {
				t.Fatalf("%d send requests: Lisa never retried while the first was pending, the scenario did not happen", n)
			}
			// The hazard's count depends on how many retries queue
			// behind the first request: at least two.
			if got := replies(hs); got != c.want && !(c.early && got >= c.want) {
				t.Fatalf("%d replies in the room (%v), want %d", got, hs.Counts(), c.want)
			}
		})
	}
}
