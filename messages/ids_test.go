package messages

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestReplyTxnIDIsDeterministicAndDistinct(t *testing.T) {
	a := ReplyTxnID("!r:hs", "$e1")
	if a != ReplyTxnID("!r:hs", "$e1") {
		t.Fatal("same inputs gave different txn IDs")
	}
	if len(a) != len("lisa_")+32 || !strings.HasPrefix(string(a), "lisa_") {
		t.Fatalf("unexpected txn ID shape %q", a)
	}
	for _, other := range []TxnID{ReplyTxnID("!r:hs", "$e2"), ReplyTxnID("!s:hs", "$e1"), ReplyTxnID("!r:hs$e", "1")} {
		if other == a {
			t.Fatalf("collision: %q", other)
		}
	}
	// Golden: the derivation is part of the on-disk contract.
	if got, want := ReplyTxnID("!room:localhost", "$event"), TxnID("lisa_5h2xDGksA7BYsr_GAtvffErQ2fs_wy9z"); got != want {
		t.Fatalf("ReplyTxnID golden = %q, want %q", got, want)
	}
}

func TestErrorCode(t *testing.T) {
	base := &Error{Code: CodeLLMTimeout, Message: "turn timed out"}
	wrapped := fmt.Errorf("invocation: %w", base)
	cases := []struct {
		err  error
		want Code
	}{
		{nil, CodeOK},
		{base, CodeLLMTimeout},
		{wrapped, CodeLLMTimeout},
		{errors.New("plain"), CodeInternal},
	}
	for _, c := range cases {
		if got := ErrorCode(c.err); got != c.want {
			t.Errorf("ErrorCode(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestActorLogIDHidesRooms(t *testing.T) {
	got := ActorLogID("app/rooms/!secretroom:hs/inv-3")
	if strings.Contains(got, "secretroom") || !strings.HasPrefix(got, "app/rooms/") || !strings.HasSuffix(got, "/inv-3") {
		t.Fatalf("ActorLogID = %q", got)
	}
	if ActorLogID("app/rooms") != "app/rooms" {
		t.Fatal("plain paths must stay readable")
	}
}
