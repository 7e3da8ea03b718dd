package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/sameorigin"
)

// invocationKey mirrors render.InvocationKey: the content field naming the
// invoking event.
const invocationKey = "org.lisabot.invocation"

// Client is Lisa's Matrix session.
type Client struct {
	cli *mautrix.Client
	// skew is how much older than a question an event of Lisa's that
	// relates to it may look (clockSkew; tests set it).
	skew time.Duration
	// limit paces the account's sends after a rate-limit refusal.
	limit limiter
}

// Connect restores the session and verifies that the token belongs to
// user and device; it refuses to continue otherwise. hc carries the
// requests; nil gets a client of its own that, like every client of
// Lisa's, ignores the HTTP(S)_PROXY environment (mautrix's default
// client would read it).
func Connect(ctx context.Context, homeserver, user, device, token string, hc *http.Client) (*Client, error) {
	c, err := Open(homeserver, user, device, token, hc)
	if err != nil {
		return nil, err
	}
	who, err := c.cli.Whoami(ctx)
	if err != nil {
		return nil, fmt.Errorf("matrix: whoami: %w", Classify(err))
	}
	if who.DeviceID == "" && device != "" {
		// Continuwuity and Synapse omit device_id for a token without a
		// device: an appservice's (docs/homeservers.md, "whoami").
		return nil, fmt.Errorf("matrix: access token of %s has no device (an appservice token?): Lisa needs the token of a login with device %s, not an appservice token",
			who.UserID, device)
	}
	if string(who.UserID) != user || string(who.DeviceID) != device {
		return nil, fmt.Errorf("matrix: access token belongs to %s device %s, but the configuration says %s device %s",
			who.UserID, who.DeviceID, user, device)
	}
	return c, nil
}

// UserID returns Lisa's user ID.
func (c *Client) UserID() string { return string(c.cli.UserID) }

// SendReply sends content (exact JSON) as an m.room.message with txnID.
func (c *Client) SendReply(ctx context.Context, room, txnID string, content []byte) (string, error) {
	var evID id.EventID
	err := c.paced(func() error {
		resp, err := c.cli.SendMessageEvent(ctx, id.RoomID(room), event.EventMessage, json.RawMessage(content),
			mautrix.ReqSendEvent{TransactionID: txnID})
		if err != nil {
			return Classify(err)
		}
		evID = resp.EventID
		return nil
	})
	return string(evID), err
}

// React puts the reaction key on eventID (an m.reaction annotation) with
// txnID and returns the reaction's event ID.
func (c *Client) React(ctx context.Context, room, eventID, key, txnID string) (string, error) {
	content := &event.ReactionEventContent{RelatesTo: event.RelatesTo{Type: event.RelAnnotation, EventID: id.EventID(eventID), Key: key}}
	var evID id.EventID
	err := c.paced(func() error {
		resp, err := c.cli.SendMessageEvent(ctx, id.RoomID(room), event.EventReaction, content, mautrix.ReqSendEvent{TransactionID: txnID})
		if err != nil {
			return Classify(err)
		}
		evID = resp.EventID
		return nil
	})
	return string(evID), err
}

// Redact redacts eventID with txnID (PUT /redact/{eventId}/{txnId}).
func (c *Client) Redact(ctx context.Context, room, eventID, txnID string) error {
	return c.paced(func() error {
		if _, err := c.cli.RedactEvent(ctx, id.RoomID(room), id.EventID(eventID), mautrix.ReqRedact{TxnID: txnID}); err != nil {
			return Classify(err)
		}
		return nil
	})
}

// findPages bounds how many pages of 100 of Lisa's own messages FindReply
// reads (the filter names her as sender).
const findPages = 50

// clockSkew is how far the clock of a question's homeserver may run ahead
// of Lisa's: a reply or reaction of hers always comes after the question
// it relates to, so a backward scan stops at her events older than the
// question's origin_server_ts by more than this. The question's timestamp
// is set by its sender's homeserver (federated: another clock), hers by
// her own; an hour covers any skew under which federation still works,
// and costs at most an hour of her events more to read.
const clockSkew = time.Hour

// lookupAttempts is how often FindReply tries one request that failed
// transiently before it gives up; the room retries the whole lookup later.
const lookupAttempts = 3

// FindReply looks backwards from the newest event for Lisa's reply to
// invokingEventID: an event from Lisa whose transaction ID is txnID, or
// that names the invocation, or that replies to it. A reply sent recently
// is on the first page. It reads up to findPages pages of her messages
// and never stops earlier on timestamps: it is the check before a reply is
// sent again, so a reply it missed would be sent twice, and another
// homeserver's clock can run ahead of hers by any amount. Each request
// that fails transiently is tried again twice before the lookup fails.
//
// (Reading forwards from the invoking event — GET /context, then
// /messages — was tried and reverted: against Dendrite under a long
// backlog it missed replies that existed, and each miss became a
// duplicate. See docs/reliability.md.)
func (c *Client) FindReply(ctx context.Context, room, invokingEventID, txnID string) (string, bool, error) {
	return c.findReply(ctx, room, invokingEventID, txnID, false)
}

// FindReplyToRedact is FindReply for a reply about to be redacted (its
// question was): the scan ends where Lisa's messages are older than the
// question by more than clockSkew (see scanOwn). A reply it misses stays
// standing; nothing is sent twice.
func (c *Client) FindReplyToRedact(ctx context.Context, room, invokingEventID, txnID string) (string, bool, error) {
	return c.findReply(ctx, room, invokingEventID, txnID, true)
}

func (c *Client) findReply(ctx context.Context, room, invokingEventID, txnID string, stopAtQuestion bool) (string, bool, error) {
	var found string
	question := ""
	if stopAtQuestion {
		question = invokingEventID
	}
	err := c.scanOwn(ctx, room, question, event.EventMessage, func(evt *event.Event) bool {
		if (txnID != "" && evt.Unsigned.TransactionID == txnID) || repliesTo(evt, invokingEventID) {
			found = string(evt.ID)
			return true
		}
		return false
	})
	if err != nil {
		return "", false, err
	}
	return found, found != "", nil
}

// FindReactions looks backwards from the newest event, within the same
// bounds as FindReplyToRedact, for Lisa's reactions key on eventID and returns
// their event IDs, newest first. A redacted reaction has lost its
// relation and is not found (it needs no redaction).
func (c *Client) FindReactions(ctx context.Context, room, eventID, key string) ([]string, error) {
	found := []string{}
	err := c.scanOwn(ctx, room, eventID, event.EventReaction, func(evt *event.Event) bool {
		var content struct {
			Rel struct {
				RelType string `json:"rel_type"`
				EventID string `json:"event_id"`
				Key     string `json:"key"`
			} `json:"m.relates_to"`
		}
		if json.Unmarshal(evt.Content.VeryRaw, &content) == nil && content.Rel.RelType == string(event.RelAnnotation) &&
			content.Rel.EventID == eventID && content.Rel.Key == key {
			found = append(found, string(evt.ID))
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

// scanPageSizes are the page sizes of scanOwn's passes. Dendrite ends a
// backward page of /messages with a token one depth below the page's last
// event (v0.13.8: syncapi/routing/messages.go retrieveEvents calls
// end.Decrement(), and types.TopologyToken.Decrement lowers the depth),
// so the events of that depth the page did not reach are never returned.
// In a busy room a member and Lisa post at once and their events share a
// depth; a page that ends between them hides her reply. The chaos
// campaign met it (6 December): with pages of 100 one of her 413 events
// in a room was never returned, and with 61 or 97 none was missed. A
// second pass with pages of 61 ends its pages elsewhere; it runs only when
// the first read more than one page and found no match.
var scanPageSizes = [...]int{100, 61}

// scanOwn reads Lisa's own events of type typ in room backwards from the
// newest, until match reports true or the scan is past the question they
// would relate to: nothing of hers older than the question can relate to
// it. It reads at most findPages pages of 100, and when that finds no
// match, the same span again in pages of another size (see
// scanPageSizes); match sees each event once. The question's
// origin_server_ts is read (GET /event; a redacted question keeps it)
// only when a second page would be needed, and a pass ends after the first
// page that holds an event of hers older than it by more than c.skew. No
// question (""), or one whose timestamp cannot be read (unknown to the
// homeserver, not visible to Lisa), leaves the page count as the only
// bound.
func (c *Client) scanOwn(ctx context.Context, room, question string, typ event.Type, match func(*event.Event) bool) error {
	filter := &mautrix.FilterPart{Types: []event.Type{typ}, Senders: []id.UserID{c.cli.UserID}}
	seen := map[id.EventID]bool{}
	cutoff, known := int64(0), false
	for _, size := range scanPageSizes {
		from, crossed := "", false
		for range findPages * 100 / size {
			var resp *mautrix.RespMessages
			err := c.retry(ctx, func() (err error) {
				resp, err = c.cli.Messages(ctx, id.RoomID(room), from, "", mautrix.DirectionBackward, filter, size)
				return err
			})
			if err != nil {
				return Classify(err)
			}
			var own []*event.Event
			for _, evt := range resp.Chunk {
				if evt == nil || evt.Sender != c.cli.UserID || evt.Type.Type != typ.Type {
					continue
				}
				own = append(own, evt)
				if seen[evt.ID] {
					continue
				}
				seen[evt.ID] = true
				if match(evt) {
					return nil
				}
			}
			if resp.End == "" || len(resp.Chunk) == 0 {
				break
			}
			if !known {
				cutoff, known = c.cutoff(ctx, room, question), true
			}
			if slices.ContainsFunc(own, func(evt *event.Event) bool { return evt.Timestamp < cutoff }) {
				break // past the question: older pages are older still
			}
			from, crossed = resp.End, true
		}
		if !crossed {
			// One page, no boundary: nothing was hidden, and a
			// correct token would not have led further either.
			return nil
		}
	}
	return nil
}

// cutoff returns the origin_server_ts (ms) below which no event of Lisa's
// can relate to question: its own less c.skew; 0 (no cutoff) when the
// question's timestamp cannot be read.
func (c *Client) cutoff(ctx context.Context, room, question string) int64 {
	if question == "" {
		return 0
	}
	var evt *event.Event
	err := c.retry(ctx, func() (err error) {
		evt, err = c.cli.GetEvent(ctx, id.RoomID(room), id.EventID(question))
		return err
	})
	if err != nil || evt == nil || evt.Timestamp <= 0 {
		return 0
	}
	return evt.Timestamp - c.skew.Milliseconds()
}

// retry runs fn up to lookupAttempts times while it fails transiently,
// waiting 100 ms, then 200 ms (or the server's Retry-After, at most 1 s).
func (c *Client) retry(ctx context.Context, fn func() error) error {
	var err error
	for i := range lookupAttempts {
		if err = fn(); err == nil {
			return nil
		}
		le := Classify(err)
		if le.Permanent || i == lookupAttempts-1 || ctx.Err() != nil {
			return err
		}
		wait := time.Duration(100<<i) * time.Millisecond
		if le.RetryAfter > 0 {
			wait = min(le.RetryAfter, time.Second)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
	return err
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
	var rerr *sameorigin.Error
	if errors.As(err, &rerr) {
		// The homeserver (or a proxy in front of it) answered with a
		// redirect to another origin, which the client refuses to follow
		// with the access token. Nothing was done there; the operator
		// must point matrix.homeserver_url at the target. Like a refused
		// token, this is retried with backoff and replies are kept.
		return &messages.Error{Code: messages.CodeMatrixForbidden, Message: "homeserver " + rerr.Error() + ": set matrix.homeserver_url to it"}
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
		case status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
			// A reverse proxy's answer while the homeserver behind it
			// is down, perhaps restarting.
			return &messages.Error{Code: messages.CodeMatrixUnavailable, Message: fmt.Sprintf("homeserver error %d", status), Ambiguous: true, Unreachable: true}
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
	// Network failure: the request may or may not have reached the
	// server, which may be restarting.
	return &messages.Error{Code: messages.CodeMatrixUnavailable, Message: "homeserver unreachable", Ambiguous: true, Unreachable: true}
}

// SetTyping turns Lisa's typing notification in room on (for timeout) or
// off.
func (c *Client) SetTyping(ctx context.Context, room string, on bool, timeout time.Duration) error {
	if _, err := c.cli.UserTyping(ctx, id.RoomID(room), on, timeout); err != nil {
		return Classify(err)
	}
	return nil
}

// GetEvent fetches one event (GET /event).
func (c *Client) GetEvent(ctx context.Context, roomID id.RoomID, eventID id.EventID) (*event.Event, error) {
	return c.cli.GetEvent(ctx, roomID, eventID)
}

// JoinedMembers lists a room's members with their display names.
func (c *Client) JoinedMembers(ctx context.Context, roomID id.RoomID) (*mautrix.RespJoinedMembers, error) {
	return c.cli.JoinedMembers(ctx, roomID)
}

// GetRelations returns one page of the events relating to eventID (GET
// /relations), for the context of a thread.
func (c *Client) GetRelations(ctx context.Context, roomID id.RoomID, eventID id.EventID, req *mautrix.ReqGetRelations) (*mautrix.RespGetRelations, error) {
	return c.cli.GetRelations(ctx, roomID, eventID, req)
}

// Messages returns one page of room events from the token from (GET
// /messages), for context beyond what GET /context returns.
func (c *Client) Messages(ctx context.Context, roomID id.RoomID, from, to string, dir mautrix.Direction, filter *mautrix.FilterPart, limit int) (*mautrix.RespMessages, error) {
	return c.cli.Messages(ctx, roomID, from, to, dir, filter, limit)
}

// StateEvent decodes the content of one state event of roomID into
// outContent (the room's name and topic, for the prompt).
func (c *Client) StateEvent(ctx context.Context, roomID id.RoomID, eventType event.Type, stateKey string, outContent any) error {
	return c.cli.StateEvent(ctx, roomID, eventType, stateKey, outContent)
}
