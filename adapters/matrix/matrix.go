package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
)

// invocationKey mirrors render.InvocationKey: the content field naming the
// invoking event.
const invocationKey = "org.lisabot.invocation"

// Client is Lisa's Matrix session.
type Client struct {
	cli *mautrix.Client
}

// Connect restores the session and verifies that the token belongs to
// user and device; it refuses to continue otherwise.
func Connect(ctx context.Context, homeserver, user, device, token string, hc *http.Client) (*Client, error) {
	cli, err := mautrix.NewClient(homeserver, id.UserID(user), token)
	if err != nil {
		return nil, fmt.Errorf("matrix: client for %s: %w", homeserver, err)
	}
	cli.DeviceID = id.DeviceID(device)
	if hc != nil {
		cli.Client = hc
	}
	who, err := cli.Whoami(ctx)
	if err != nil {
		return nil, fmt.Errorf("matrix: whoami: %w", Classify(err))
	}
	if string(who.UserID) != user || string(who.DeviceID) != device {
		return nil, fmt.Errorf("matrix: access token belongs to %s device %s, but the configuration says %s device %s",
			who.UserID, who.DeviceID, user, device)
	}
	return &Client{cli: cli}, nil
}

// UserID returns Lisa's user ID.
func (c *Client) UserID() string { return string(c.cli.UserID) }

// SendReply sends content (exact JSON) as an m.room.message with txnID.
func (c *Client) SendReply(ctx context.Context, room, txnID string, content []byte) (string, error) {
	resp, err := c.cli.SendMessageEvent(ctx, id.RoomID(room), event.EventMessage, json.RawMessage(content),
		mautrix.ReqSendEvent{TransactionID: txnID})
	if err != nil {
		return "", Classify(err)
	}
	return string(resp.EventID), nil
}

// findPages bounds how far back FindReply looks: pages of 100 of Lisa's own
// messages (the filter names her as sender).
const findPages = 50

// FindReply looks backwards through the room for Lisa's reply to
// invokingEventID: an event from Lisa whose transaction ID is txnID, or
// that names the invocation, or that replies to it.
func (c *Client) FindReply(ctx context.Context, room, invokingEventID, txnID string) (string, bool, error) {
	from := ""
	for range findPages {
		resp, err := c.cli.Messages(ctx, id.RoomID(room), from, "", mautrix.DirectionBackward,
			&mautrix.FilterPart{Types: []event.Type{event.EventMessage}, Senders: []id.UserID{c.cli.UserID}}, 100)
		if err != nil {
			return "", false, Classify(err)
		}
		for _, evt := range resp.Chunk {
			if evt.Sender != c.cli.UserID {
				continue
			}
			if (txnID != "" && evt.Unsigned.TransactionID == txnID) || repliesTo(evt, invokingEventID) {
				return string(evt.ID), true, nil
			}
		}
		if resp.End == "" || len(resp.Chunk) == 0 {
			break
		}
		from = resp.End
	}
	return "", false, nil
}

func repliesTo(evt *event.Event, invoking string) bool {
	raw := evt.Content.Raw
	if raw == nil && len(evt.Content.VeryRaw) > 0 {
		_ = json.Unmarshal(evt.Content.VeryRaw, &raw)
	}
	if v, ok := raw[invocationKey].(string); ok && v == invoking {
		return true
	}
	rel, _ := raw["m.relates_to"].(map[string]any)
	irt, _ := rel["m.in_reply_to"].(map[string]any)
	v, _ := irt["event_id"].(string)
	return v == invoking
}

// Classify maps a mautrix error to a messages.Error.
func Classify(err error) *messages.Error {
	var le *messages.Error
	if errors.As(err, &le) {
		return le
	}
	var herr mautrix.HTTPError
	if errors.As(err, &herr) && herr.Response != nil {
		status := herr.Response.StatusCode
		code := ""
		var retry time.Duration
		if herr.RespError != nil {
			code = herr.RespError.ErrCode
			if ms, ok := herr.RespError.ExtraData["retry_after_ms"].(float64); ok && ms > 0 {
				retry = time.Duration(ms) * time.Millisecond
			}
		}
		switch {
		case status < 300:
			// The homeserver accepted the request, but its answer could
			// not be read (cut short, not JSON, too large): whatever it
			// did may have happened. Retry, and reconcile a send.
			return &messages.Error{Code: messages.CodeMatrixUnavailable, Message: fmt.Sprintf("unreadable homeserver response (%d)", status), Ambiguous: true}
		case status == http.StatusTooManyRequests:
			return &messages.Error{Code: messages.CodeMatrixRateLimit, Message: "rate limited by homeserver", RetryAfter: retry}
		case status >= 500:
			return &messages.Error{Code: messages.CodeMatrixUnavailable, Message: fmt.Sprintf("homeserver error %d", status), Ambiguous: true}
		case status == http.StatusUnauthorized:
			// A revoked or expired token: nothing Lisa sends will work
			// until the operator fixes it, but the replies must not be
			// thrown away. Retry with backoff.
			return &messages.Error{Code: messages.CodeMatrixForbidden, Message: fmt.Sprintf("homeserver does not accept the access token (%s)", code)}
		case status == http.StatusForbidden:
			return &messages.Error{Code: messages.CodeMatrixForbidden, Message: fmt.Sprintf("homeserver refused (%d %s)", status, code), Permanent: true}
		default:
			return &messages.Error{Code: messages.CodeMatrixRejected, Message: fmt.Sprintf("homeserver rejected the request (%d %s)", status, code), Permanent: true}
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &messages.Error{Code: messages.CodeShutdown, Message: "request cancelled", Ambiguous: true}
	}
	// Network failure: the request may or may not have reached the server.
	return &messages.Error{Code: messages.CodeMatrixUnavailable, Message: "homeserver unreachable", Ambiguous: true}
}

// SetTyping turns Lisa's typing notification in room on (for timeout) or
// off.
func (c *Client) SetTyping(ctx context.Context, room string, on bool, timeout time.Duration) error {
	if _, err := c.cli.UserTyping(ctx, id.RoomID(room), on, timeout); err != nil {
		return Classify(err)
	}
	return nil
}

// Context fetches the events around eventID (GET /context), for the
// conversation-context builder.
func (c *Client) Context(ctx context.Context, roomID id.RoomID, eventID id.EventID, filter *mautrix.FilterPart, limit int) (*mautrix.RespContext, error) {
	return c.cli.Context(ctx, roomID, eventID, filter, limit)
}

// GetEvent fetches one event (GET /event).
func (c *Client) GetEvent(ctx context.Context, roomID id.RoomID, eventID id.EventID) (*event.Event, error) {
	return c.cli.GetEvent(ctx, roomID, eventID)
}

// JoinedMembers lists a room's members with their display names.
func (c *Client) JoinedMembers(ctx context.Context, roomID id.RoomID) (*mautrix.RespJoinedMembers, error) {
	return c.cli.JoinedMembers(ctx, roomID)
}
