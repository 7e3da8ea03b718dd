package roomctx

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
)

// maxNameChars bounds a display name in the block.
const maxNameChars = 64

// nameBook maps users to display names: joined members first, then the
// member state returned by GET /context.
type nameBook struct {
	joined map[id.UserID]string
	state  map[id.UserID]string
}

// joinedMembers fetches room's joined members. Failures only cost names
// (the user ID stands in): they are logged and give nil.
func (b *Builder) joinedMembers(ctx context.Context, room id.RoomID) *mautrix.RespJoinedMembers {
	resp, err := b.fetch.JoinedMembers(ctx, room)
	if err != nil {
		b.log.DebugContext(ctx, "joined members unavailable", "room", messages.RoomID(room), "status", errorStatus(err))
		return nil
	}
	return resp
}

// namesOf collects display names for room: joined members first, then the
// member state returned with the context.
func namesOf(room id.RoomID, joined *mautrix.RespJoinedMembers, state []*event.Event) nameBook {
	nb := nameBook{joined: map[id.UserID]string{}, state: map[id.UserID]string{}}
	if joined != nil {
		for u, m := range joined.Joined {
			if n := cleanName(m.DisplayName); n != "" {
				nb.joined[u] = n
			}
		}
	}
	for _, evt := range state {
		if evt == nil || evt.Type.Type != event.StateMember.Type || evt.StateKey == nil ||
			(evt.RoomID != "" && evt.RoomID != room) {
			continue
		}
		if n := cleanName(memberName(evt)); n != "" {
			nb.state[id.UserID(*evt.StateKey)] = n
		}
	}
	return nb
}

// lookup returns the display name of u, or u itself if it has none.
func (nb nameBook) lookup(u id.UserID) string {
	if n, ok := nb.joined[u]; ok {
		return n
	}
	if n, ok := nb.state[u]; ok {
		return n
	}
	return string(u)
}

// memberName reads the displayname of a member event without touching
// the event.
func memberName(evt *event.Event) string {
	if m, ok := evt.Content.Parsed.(*event.MemberEventContent); ok && m != nil {
		return m.Displayname
	}
	n, _ := evt.Content.Raw["displayname"].(string)
	return n
}

// cleanName makes a display name a single line of at most maxNameChars
// characters.
func cleanName(s string) string { return cleanLine(s, maxNameChars) }

// cleanLine makes s valid UTF-8 on a single line of at most maxChars
// characters, without control or bidirectional formatting characters,
// white space runs collapsed; a longer text is cut and ends with "…".
func cleanLine(s string, maxChars int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.IsSpace(r) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > maxChars {
		s = string([]rune(s)[:maxChars-1]) + "…"
	}
	return s
}
