package roomctx

import (
	"context"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
)

// Bounds on the room facts. Name and topic are set by room members.
const (
	maxRoomNameChars  = 128
	maxRoomTopicChars = 500
)

// StateFetcher is an optional capability of a [Fetcher]: reading one
// state event's content (GET /rooms/{roomId}/state/{type}/{key}).
// *mautrix.Client has it. Without it, the room facts have no name or
// topic.
type StateFetcher interface {
	// StateEvent decodes the content of the state event into outContent.
	StateEvent(ctx context.Context, roomID id.RoomID, eventType event.Type, stateKey string, outContent any) error
}

// roomState fetches the room's name and topic, each bounded and made a
// single line of plain text. What cannot be fetched (not set, or the
// request failed) is left empty.
func (b *Builder) roomState(ctx context.Context, room id.RoomID) (name, topic string) {
	sf, ok := b.fetch.(StateFetcher)
	if !ok {
		return "", ""
	}
	var n event.RoomNameEventContent
	if err := sf.StateEvent(ctx, room, event.StateRoomName, "", &n); err != nil {
		b.log.DebugContext(ctx, "room name unavailable", "room", messages.RoomID(room), "status", errorStatus(err))
	}
	var t event.TopicEventContent
	if err := sf.StateEvent(ctx, room, event.StateTopic, "", &t); err != nil {
		b.log.DebugContext(ctx, "room topic unavailable", "room", messages.RoomID(room), "status", errorStatus(err))
	}
	return cleanLine(n.Name, maxRoomNameChars), cleanLine(t.Topic, maxRoomTopicChars)
}

// facts assembles the room facts: the name and topic from the room state,
// and Lisa's display name among the joined members.
func (b *Builder) facts(name, topic string, joined *mautrix.RespJoinedMembers) messages.RoomFacts {
	f := messages.RoomFacts{Name: name, Topic: topic}
	if joined != nil {
		f.BotName = cleanName(joined.Joined[b.bot].DisplayName)
	}
	return f
}
