package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/homeserver"
)

// TestRoomEncryptedAnswers: RoomEncrypted asks for the room's
// m.room.encryption state event and reads the homeserver's answer: 404
// M_NOT_FOUND is "not encrypted", 200 is "encrypted", a 5xx is tried
// three times and then an error, a refusal is an error at once, and a 404
// that is not the homeserver's M_NOT_FOUND proves nothing.
func TestRoomEncryptedAnswers(t *testing.T) {
	const room = "!room:hs"
	cases := []struct {
		name      string
		status    int
		body      string
		encrypted bool
		code      messages.Code // "" means no error
		calls     int32
	}{
		{"no encryption event", 404, `{"errcode":"M_NOT_FOUND","error":"Cannot find state event"}`, false, "", 1},
		{"encryption event", 200, `{"algorithm":"m.megolm.v1.aes-sha2"}`, true, "", 1},
		{"server error", 500, `{"errcode":"M_UNKNOWN","error":"boom"}`, false, messages.CodeMatrixUnavailable, lookupAttempts},
		{"not a member", 403, `{"errcode":"M_FORBIDDEN","error":"not joined"}`, false, messages.CodeMatrixForbidden, 1},
		{"404 from a proxy", 404, `<html>not found</html>`, false, messages.CodeMatrixRejected, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int32
			var path atomic.Value
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				calls.Add(1)
				path.Store(r.Method + " " + r.URL.EscapedPath())
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, c.body)
			}))
			defer srv.Close()
			cli, err := mautrix.NewClient(srv.URL, "@lisa:hs", "token")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := (&Client{cli: cli}).RoomEncrypted(ctx, room)
			if got != c.encrypted {
				t.Errorf("encrypted = %v, want %v", got, c.encrypted)
			}
			var le *messages.Error
			switch {
			case c.code == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case c.code != "" && (!errors.As(err, &le) || le.Code != c.code):
				t.Errorf("err = %#v, want code %s", err, c.code)
			}
			if n := calls.Load(); n != c.calls {
				t.Errorf("%d requests, want %d", n, c.calls)
			}
			want := "GET /_matrix/client/v3/rooms/%21room:hs/state/m.room.encryption"
			if p, _ := path.Load().(string); !strings.HasPrefix(p, want) || strings.TrimSuffix(strings.TrimPrefix(p, want), "/") != "" {
				t.Errorf("request %q, want %q", p, want+"/")
			}
		})
	}
}

// TestIsEncryptionEvent: only the room's m.room.encryption state event
// (state key "") turns encryption on; a message, an encrypted message and
// a timeline event of that type without a state key do not.
func TestIsEncryptionEvent(t *testing.T) {
	parse := func(raw string) *event.Event {
		t.Helper()
		var evt event.Event
		if err := json.Unmarshal([]byte(raw), &evt); err != nil {
			t.Fatal(err)
		}
		return &evt
	}
	cases := []struct {
		raw  string
		want bool
	}{
		{`{"type":"m.room.encryption","state_key":"","content":{"algorithm":"m.megolm.v1.aes-sha2"},"event_id":"$a"}`, true},
		{`{"type":"m.room.encryption","state_key":"x","content":{"algorithm":"m.megolm.v1.aes-sha2"},"event_id":"$b"}`, false},
		{`{"type":"m.room.encryption","content":{"algorithm":"m.megolm.v1.aes-sha2"},"event_id":"$c"}`, false},
		{`{"type":"m.room.encrypted","content":{"algorithm":"m.megolm.v1.aes-sha2"},"event_id":"$d"}`, false},
		{`{"type":"m.room.message","content":{"msgtype":"m.text","body":"m.room.encryption"},"event_id":"$e"}`, false},
	}
	for _, c := range cases {
		if got := IsEncryptionEvent(parse(c.raw)); got != c.want {
			t.Errorf("IsEncryptionEvent(%s) = %v, want %v", c.raw, got, c.want)
		}
	}
	if IsEncryptionEvent(nil) {
		t.Error("IsEncryptionEvent(nil) = true")
	}
	if got := EncryptedRoomProblem("!r:hs"); got != "room !r:hs is encrypted; Lisa cannot read it" {
		t.Errorf("EncryptedRoomProblem = %q", got)
	}
}

// TestRoomEncryptedCancelled: a check cut short by its context is an
// error, never a verdict.
func TestRoomEncryptedCancelled(t *testing.T) {
	cli, _ := mautrix.NewClient("http://127.0.0.1:1", id.UserID("@lisa:hs"), "token")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if enc, err := (&Client{cli: cli}).RoomEncrypted(ctx, "!r:hs"); err == nil || enc {
		t.Fatalf("cancelled check: %v %v", enc, err)
	}
}

// TestRoomEncryptedAgainstHomeservers: against each real homeserver, a room
// created with encryption is encrypted, a plain room is not, and a room
// Lisa was never invited to cannot be checked (matrix_forbidden, no verdict).
func TestRoomEncryptedAgainstHomeservers(t *testing.T) {
	t.Parallel() // its own servers; at most -parallel at once
	homeserver.Each(t, testRoomEncryptedAgainstHomeservers)
}

// testRoomEncryptedAgainstHomeservers is TestRoomEncryptedAgainstHomeservers on one homeserver.
func testRoomEncryptedAgainstHomeservers(t *testing.T, hs homeserver.Server) {
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
	c, err := Connect(ctx, hs.URL(), bot.UserID, bot.DeviceID, bot.AccessToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	hc, _ := mautrix.NewClient(hs.URL(), id.UserID(human.UserID), human.AccessToken)
	bc, _ := mautrix.NewClient(hs.URL(), id.UserID(bot.UserID), bot.AccessToken)
	newRoom := func(encrypted, join bool) string {
		t.Helper()
		req := &mautrix.ReqCreateRoom{Preset: "private_chat"}
		if join {
			req.Invite = []id.UserID{id.UserID(bot.UserID)}
		}
		if encrypted {
			req.InitialState = []*event.Event{{Type: event.StateEncryption, Content: event.Content{
				Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}}}}
		}
		r, err := hc.CreateRoom(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if join {
			if _, err := bc.JoinRoomByID(ctx, r.RoomID); err != nil {
				t.Fatal(err)
			}
		}
		return string(r.RoomID)
	}
	if enc, err := c.RoomEncrypted(ctx, newRoom(true, true)); err != nil || !enc {
		t.Errorf("encrypted room: %v %v", enc, err)
	}
	if enc, err := c.RoomEncrypted(ctx, newRoom(false, true)); err != nil || enc {
		t.Errorf("plain room: %v %v", enc, err)
	}
	var le *messages.Error
	if enc, err := c.RoomEncrypted(ctx, newRoom(true, false)); enc || !errors.As(err, &le) || le.Code != messages.CodeMatrixForbidden {
		t.Errorf("room not joined: %v %#v", enc, err)
	}
}
