package matrix

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/homeserver"
)

// TestPermissionChanges: on each real homeserver (testkit/homeserver's
// list), a change of an allowed room's
// power levels and Lisa's own membership (she leaves and joins again)
// arrive as candidates with the triggers power_levels and membership,
// each once; another member's join is no candidate; none of these
// events becomes the room's back-fill anchor; a room outside the
// allowlist routes nothing.
func TestPermissionChanges(t *testing.T) {
	t.Parallel() // its own servers; at most -parallel at once
	homeserver.Each(t, testPermissionChanges)
}

// testPermissionChanges is TestPermissionChanges on one homeserver.
func testPermissionChanges(t *testing.T, hs homeserver.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bot, _ := hs.RegisterUser(ctx, "lisa", "lisa-password-1", "LISAPL")
	humanAcc, _ := hs.RegisterUser(ctx, "human", "human-password-1", "HUMANPL")
	otherAcc, _ := hs.RegisterUser(ctx, "other", "other-password-1", "OTHERPL")
	human, _ := mautrix.NewClient(hs.URL(), id.UserID(humanAcc.UserID), humanAcc.AccessToken)
	other, _ := mautrix.NewClient(hs.URL(), id.UserID(otherAcc.UserID), otherAcc.AccessToken)
	botCli, _ := mautrix.NewClient(hs.URL(), id.UserID(bot.UserID), bot.AccessToken)
	var rooms []id.RoomID
	for range 2 {
		r, err := human.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat",
			Invite: []id.UserID{id.UserID(bot.UserID), id.UserID(otherAcc.UserID)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := botCli.JoinRoomByID(ctx, r.RoomID); err != nil {
			t.Fatal(err)
		}
		rooms = append(rooms, r.RoomID)
	}
	allowed, notAllowed := rooms[0], rooms[1]
	c, err := Connect(ctx, hs.URL(), bot.UserID, bot.DeviceID, bot.AccessToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := NewSource(c, SyncOptions{Timeout: 500 * time.Millisecond, TimelineLimit: 20, GapPageLimit: 3, Aliases: []string{"Lisa"},
		AllowedRooms: []string{string(allowed)}}, &emptyLedger{}, slog.New(slog.DiscardHandler), time.Now)
	base, err := src.Next(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}

	var pl event.PowerLevelsEventContent
	if err := human.StateEvent(ctx, allowed, event.StatePowerLevels, "", &pl); err != nil {
		t.Fatal(err)
	}
	pl.EventsDefault = 50
	plResp, err := human.SendStateEvent(ctx, allowed, event.StatePowerLevels, "", &pl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := human.SendStateEvent(ctx, notAllowed, event.StatePowerLevels, "", &pl); err != nil {
		t.Fatal(err)
	}
	if _, err := other.JoinRoomByID(ctx, allowed); err != nil {
		t.Fatal(err)
	}
	msg, err := human.SendMessageEvent(ctx, allowed, event.EventMessage, &event.MessageEventContent{MsgType: event.MsgText, Body: "chatter"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := botCli.LeaveRoom(ctx, allowed); err != nil {
		t.Fatal(err)
	}
	if _, err := human.InviteUser(ctx, allowed, &mautrix.ReqInviteUser{UserID: id.UserID(bot.UserID)}); err != nil {
		t.Fatal(err)
	}
	if _, err := botCli.JoinRoomByID(ctx, allowed); err != nil {
		t.Fatal(err)
	}

	cur := base.Cursor
	var got []string
	var anchors []string
	wantPL := string(plResp.EventID) + "/" + messages.TriggerPowerLevels
	isMembership := func(s string) bool { return strings.HasSuffix(s, "/"+messages.TriggerMembership) }
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		b, err := src.Next(ctx, cur)
		if err != nil {
			t.Fatal(err)
		}
		cur = b.Cursor
		anchors = append(anchors, cur.GetLastEventIds()[string(allowed)])
		seen := map[string]bool{}
		for _, c := range b.Candidates {
			if c.GetRoomId() != string(allowed) {
				t.Fatalf("candidate %s/%s of a room outside the allowlist", c.GetEventId(), c.GetTrigger())
			}
			if c.GetSender() == otherAcc.UserID {
				t.Fatalf("another member's event %s/%s routed", c.GetEventId(), c.GetTrigger())
			}
			if seen[c.GetEventId()] {
				t.Fatalf("%s routed twice in one answer (state and timeline)", c.GetEventId())
			}
			seen[c.GetEventId()] = true
			got = append(got, c.GetEventId()+"/"+c.GetTrigger())
		}
		if slices.Contains(got, wantPL) && slices.ContainsFunc(got, isMembership) {
			break
		}
	}
	// Lisa's join again brings the room's whole state along (her earlier
	// membership events, the first power levels): each a change as far as
	// she is concerned; the ledger routes an event ID only once.
	if !slices.Contains(got, wantPL) || !slices.ContainsFunc(got, isMembership) {
		t.Fatalf("candidates %v: want the power levels change %s and Lisa's membership", got, plResp.EventID)
	}
	for _, g := range got {
		if !isMembership(g) && !strings.HasSuffix(g, "/"+messages.TriggerPowerLevels) {
			t.Fatalf("candidates %v: %s is no permission change", got, g)
		}
	}
	for _, a := range anchors {
		if a != "" && a != string(msg.EventID) && a != base.Cursor.GetLastEventIds()[string(allowed)] {
			t.Fatalf("anchor %s is neither the chatter %s nor the baseline's: a state event became the back-fill anchor", a, msg.EventID)
		}
	}
}
