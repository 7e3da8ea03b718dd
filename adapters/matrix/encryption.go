package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Lisa has no end-to-end encryption (no crypto package, no keys): in an
// encrypted room she only sees m.room.encrypted events she cannot read,
// so she would stay silent there. These helpers let the daemon say so.

// RoomEncrypted reports whether room has end-to-end encryption turned on,
// that is whether it has an m.room.encryption state event (encryption
// cannot be turned off again once on). The homeserver's 404 M_NOT_FOUND
// means it has none. A request that fails transiently is tried again
// twice, like every read of Lisa's; other failures are returned
// classified (*messages.Error), for example matrix_forbidden when Lisa is
// not a member of the room.
func (c *Client) RoomEncrypted(ctx context.Context, room string) (bool, error) {
	var content json.RawMessage
	err := c.retry(ctx, func() error {
		return c.cli.StateEvent(ctx, id.RoomID(room), event.StateEncryption, "", &content)
	})
	switch {
	case err == nil:
		return true, nil
	case notFound(err):
		return false, nil
	default:
		return false, Classify(err)
	}
}

// notFound reports whether err is the homeserver's 404 M_NOT_FOUND. A 404
// without that code (a proxy in front of the homeserver, say) proves
// nothing about the room.
func notFound(err error) bool {
	var herr mautrix.HTTPError
	return errors.As(err, &herr) && herr.Response != nil && herr.Response.StatusCode == http.StatusNotFound &&
		herr.RespError != nil && herr.RespError.ErrCode == mautrix.MNotFound.ErrCode
}

// IsEncryptionEvent reports whether evt turns on encryption in its room:
// an m.room.encryption state event (state key ""). The sync can call it
// on the state and timeline events of an allowed room to notice a room
// becoming encrypted while Lisa runs.
func IsEncryptionEvent(evt *event.Event) bool {
	return evt != nil && evt.Type.Type == event.StateEncryption.Type && evt.StateKey != nil && *evt.StateKey == ""
}

// EncryptedRoomProblem is the operator's line for an encrypted allowed
// room, in the log and in `lisa health`. It names the room ID as
// configured (not hashed): the operator has to find the room.
func EncryptedRoomProblem(room string) string {
	return fmt.Sprintf("room %s is encrypted; Lisa cannot read it", room)
}

// maxRoomNameRunes bounds a room name as Lisa shows it (the status page).
const maxRoomNameRunes = 120

// RoomName returns the room's name (m.room.name), "" when it has none,
// cut to maxRoomNameRunes. It is homeserver text: whoever shows it must
// escape it.
func (c *Client) RoomName(ctx context.Context, room string) (string, error) {
	var content struct {
		Name string `json:"name"`
	}
	err := c.retry(ctx, func() error {
		return c.cli.StateEvent(ctx, id.RoomID(room), event.StateRoomName, "", &content)
	})
	switch {
	case err == nil:
	case notFound(err):
		return "", nil
	default:
		return "", Classify(err)
	}
	name := []rune(strings.TrimSpace(content.Name))
	if len(name) > maxRoomNameRunes {
		name = append(name[:maxRoomNameRunes-1], '…')
	}
	return string(name), nil
}
