package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/persistence"
)

// TestTxnIDsFrom: on a server that scopes transaction IDs to the access
// token, replies of an earlier process count as covered only while the
// token is the one it used; on one that keeps them per device, always;
// the token itself is never stored.
func TestTxnIDsFrom(t *testing.T) {
	dir := t.TempDir()
	store, err := persistence.OpenBadger(dir, persistence.BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	perToken := matrix.TxnIDs{Retention: time.Hour, PerToken: true}
	perDevice := matrix.TxnIDs{Retention: time.Hour}
	now := time.UnixMilli(1_700_000_000_000)
	for i, c := range []struct {
		txn   matrix.TxnIDs
		token string
		want  time.Time
	}{
		{perToken, "syt_first_token", now},         // nothing recorded before
		{perToken, "syt_first_token", time.Time{}}, // the same token
		{perToken, "syt_second_token", now},        // the token changed
		{perDevice, "syt_third_token", time.Time{}},
		{matrix.TxnIDs{}, "syt_third_token", time.Time{}},
	} {
		got, err := txnIDsFrom(store, c.txn, c.token, now)
		if err != nil || !got.Equal(c.want) {
			t.Fatalf("start %d: txnIDsFrom = %v %v, want %v", i+1, got, err, c.want)
		}
	}
	prev, err := store.SwapSessionFingerprint("x")
	if err != nil || len(prev) != 32 || strings.Contains(prev, "syt_") {
		t.Fatalf("recorded %q (%v), want a 32-digit fingerprint", prev, err)
	}
}
