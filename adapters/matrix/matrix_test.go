package matrix

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/homeserver"
)

// TestAgainstHomeservers: on each real homeserver (testkit/homeserver's
// list), Connect checks the token's device, a send to a room Lisa has not
// joined is refused permanently, a send repeated with its transaction ID
// while the server runs gives the same event, and FindReply finds the
// reply and no other. After a restart the same send gives the same event
// only where the server keeps txn IDs (Synapse, not Dendrite), and Lisa's
// "auto" txn policy says so of each.
func TestAgainstHomeservers(t *testing.T) {
	t.Parallel() // its own servers; at most -parallel at once
	homeserver.Each(t, testAgainstHomeservers)
}

// testAgainstHomeservers is TestAgainstHomeservers on one homeserver.
func testAgainstHomeservers(t *testing.T, hs homeserver.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bot, err := hs.RegisterUser(ctx, "lisa", "lisa-password-1", "LISADEV")
	if err != nil {
		t.Fatal(err)
	}
	human, err := hs.RegisterUser(ctx, "human", "human-password-1", "HUMANDEV")
	if err != nil {
		t.Fatal(err)
	}

	// Whoami must match configuration; the error never shows the token.
	_, err = Connect(ctx, hs.URL(), bot.UserID, "OTHERDEVICE", bot.AccessToken, nil)
	if err == nil || !strings.Contains(err.Error(), "OTHERDEVICE") || strings.Contains(err.Error(), bot.AccessToken) {
		t.Fatalf("device mismatch: %v", err)
	}
	if _, err := Connect(ctx, hs.URL(), bot.UserID, bot.DeviceID, "not-a-token", nil); err == nil {
		t.Fatal("bad token accepted")
	}
	c, err := Connect(ctx, hs.URL(), bot.UserID, bot.DeviceID, bot.AccessToken, nil)
	if err != nil {
		t.Fatal(err)
	}

	hc, _ := mautrix.NewClient(hs.URL(), id.UserID(human.UserID), human.AccessToken)
	room, err := hc.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{id.UserID(bot.UserID)}})
	if err != nil {
		t.Fatal(err)
	}
	// Not joined yet: the homeserver refuses, permanently.
	_, err = c.SendReply(ctx, string(room.RoomID), "lisa_txn_0", []byte(`{"msgtype":"m.text","body":"x"}`))
	var le *messages.Error
	if !errors.As(err, &le) || !le.Permanent || le.Code != messages.CodeMatrixForbidden {
		t.Fatalf("send to unjoined room: %#v", err)
	}
	bc, _ := mautrix.NewClient(hs.URL(), id.UserID(bot.UserID), bot.AccessToken)
	if _, err := bc.JoinRoomByID(ctx, room.RoomID); err != nil {
		t.Fatal(err)
	}
	if _, found, err := c.FindReply(ctx, string(room.RoomID), "$invoking", "lisa_txn_1"); err != nil || found {
		t.Fatalf("FindReply before sending: %v %v", found, err)
	}
	content := []byte(`{"msgtype":"m.text","body":"answer","m.relates_to":{"m.in_reply_to":{"event_id":"$invoking"}},"org.lisabot.invocation":"$invoking"}`)
	sent, err := c.SendReply(ctx, string(room.RoomID), "lisa_txn_1", content)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.SendReply(ctx, string(room.RoomID), "lisa_txn_1", content)
	if err != nil || again != sent {
		t.Fatalf("same txn gave %s then %s (%v)", sent, again, err)
	}
	awaitReply(ctx, t, c, string(room.RoomID), "$invoking", "lisa_txn_1", sent)
	if _, found, _ := c.FindReply(ctx, string(room.RoomID), "$other", "lisa_txn_2"); found {
		t.Fatal("found a reply to an event Lisa never answered")
	}

	// matrix.txn_ids_survive_restart = "auto" must say of the real server
	// what it does: keep the transaction ID across a restart on Synapse
	// (event_txn_id, written with the event in _persist_transaction_ids_txn,
	// synapse/storage/databases/main/events.py, and looked up per token in
	// get_event_id_from_transaction_id, events_worker.py, v1.67.0), forget
	// it on Dendrite (internal/transactions/transactions.go, v0.13.8: an
	// in-memory map, so the same send after a restart stores a second
	// event — why Lisa holds a reply in doubt there).
	policy := TxnIDPolicy("auto", c.Identify(ctx, 10*time.Second))
	if survive := policy.Retention > 0; survive != hs.TxnIDsSurviveRestart() {
		t.Fatalf("auto policy on %s %s: keeps txn IDs = %v (%s), but the server does: %v",
			hs.Name(), hs.Version(), survive, policy.Reason, hs.TxnIDsSurviveRestart())
	}
	if err := hs.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if c, err = Connect(ctx, hs.URL(), bot.UserID, bot.DeviceID, bot.AccessToken, nil); err != nil {
		t.Fatal(err)
	}
	after, err := c.SendReply(ctx, string(room.RoomID), "lisa_txn_1", content)
	if err != nil {
		t.Fatal(err)
	}
	if (after == sent) != hs.TxnIDsSurviveRestart() {
		t.Fatalf("%s: the same txn ID after a restart gave %s (first %s); the server keeps txn IDs: %v",
			hs.Name(), after, sent, hs.TxnIDsSurviveRestart())
	}
}

// awaitReply polls FindReply until it finds a reply, which must be want:
// the homeserver may need a moment before /messages shows an event.
func awaitReply(ctx context.Context, t *testing.T, c *Client, room, invoking, txn, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, found, err := c.FindReply(ctx, room, invoking, txn)
		if err != nil {
			t.Fatal(err)
		}
		if found {
			if got != want {
				t.Fatalf("found %s, want %s", got, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("sent reply not found")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
