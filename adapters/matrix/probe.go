package matrix

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/lisabot/lisa/sameorigin"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// The requests below serve `lisa doctor`: they ask the homeserver what
// Lisa's account can do without acting in any room, and say exactly why
// a request failed ([ProbeError]).

// Open returns a session for token without checking it: unlike [Connect]
// it makes no request, so a diagnosis can ask [Client.Whoami] itself and
// go on when the token belongs to another device. hc is as for Connect.
func Open(homeserver, user, device, token string, hc *http.Client) (*Client, error) {
	cli, err := mautrix.NewClient(homeserver, id.UserID(user), token)
	if err != nil {
		return nil, fmt.Errorf("matrix: client for %s: %w", homeserver, err)
	}
	cli.DeviceID = id.DeviceID(device)
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil
		hc = &http.Client{Transport: tr}
	}
	// The access token goes in a header that Go would copy to a redirect
	// target on the same host but another port or scheme.
	cli.Client = sameorigin.Guard(hc)
	return &Client{cli: cli, skew: clockSkew}, nil
}

// ProbeError says why a diagnostic request failed: the homeserver's HTTP
// status and Matrix error code when it answered, otherwise the network
// error (without the URL) or that the time ran out. It never holds the
// access token (which mautrix sends in a header, never in the URL).
type ProbeError struct {
	// Status is the HTTP status; 0 when no answer came.
	Status int
	// ErrCode is the Matrix error code of the answer ("M_UNKNOWN_TOKEN").
	ErrCode string
	// Cause is the network error when no answer came ("connect:
	// connection refused"), or what was wrong with the answer.
	Cause string
	// Timeout: the request was cut short by its deadline.
	Timeout bool
}

// Error implements error.
func (e *ProbeError) Error() string {
	switch {
	case e.Timeout:
		return "no answer in time"
	case e.Status == 0:
		return e.Cause
	case e.ErrCode != "":
		return fmt.Sprintf("HTTP %d %s", e.Status, e.ErrCode)
	case e.Cause != "":
		return fmt.Sprintf("HTTP %d: %s", e.Status, e.Cause)
	}
	return fmt.Sprintf("HTTP %d", e.Status)
}

// probeError turns a mautrix error into a *ProbeError; ctx tells a
// deadline apart from other failures.
func probeError(ctx context.Context, err error) *ProbeError {
	var rerr *sameorigin.Error
	if errors.As(err, &rerr) {
		// A redirect to another origin, not followed: say where it
		// pointed rather than "HTTP 307".
		return &ProbeError{Cause: rerr.Error()}
	}
	var herr mautrix.HTTPError
	if errors.As(err, &herr) && herr.Response != nil {
		pe := &ProbeError{Status: herr.Response.StatusCode}
		if herr.RespError != nil {
			pe.ErrCode = herr.RespError.ErrCode
		}
		if pe.Status < 300 {
			pe.Cause = "the answer could not be read"
		}
		return pe
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return &ProbeError{Timeout: true}
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return &ProbeError{Cause: uerr.Err.Error()}
	}
	return &ProbeError{Cause: err.Error()}
}

// SpecVersions returns the Matrix spec versions the homeserver supports
// (GET /_matrix/client/versions, which needs no token).
func (c *Client) SpecVersions(ctx context.Context) ([]string, error) {
	resp, err := c.cli.Versions(ctx)
	if err != nil {
		return nil, probeError(ctx, err)
	}
	out := make([]string, 0, len(resp.Versions))
	for _, v := range resp.Versions {
		out = append(out, v.String())
	}
	return out, nil
}

// Whoami returns the user and device the access token belongs to.
func (c *Client) Whoami(ctx context.Context) (user, device string, err error) {
	resp, err := c.cli.Whoami(ctx)
	if err != nil {
		return "", "", probeError(ctx, err)
	}
	return string(resp.UserID), string(resp.DeviceID), nil
}

// JoinedRooms returns the rooms the token's user has joined.
func (c *Client) JoinedRooms(ctx context.Context) ([]string, error) {
	resp, err := c.cli.JoinedRooms(ctx)
	if err != nil {
		return nil, probeError(ctx, err)
	}
	out := make([]string, len(resp.JoinedRooms))
	for i, r := range resp.JoinedRooms {
		out[i] = string(r)
	}
	return out, nil
}

// IsEncrypted is [Client.RoomEncrypted] for a diagnosis: one request, its
// failure a *ProbeError.
func (c *Client) IsEncrypted(ctx context.Context, room string) (bool, error) {
	var content event.EncryptionEventContent
	err := c.cli.StateEvent(ctx, id.RoomID(room), event.StateEncryption, "", &content)
	switch {
	case err == nil:
		return true, nil
	case notFound(err):
		return false, nil
	}
	return false, probeError(ctx, err)
}

// Powers are Lisa's power level in a room and the levels her events
// need there.
type Powers struct {
	// User is Lisa's own level; Creator that she has the unlimited power
	// of a room creator (room versions 12 and later).
	User    int
	Creator bool
	// Message, Reaction and Redaction are the levels needed to send an
	// m.room.message (a reply), an m.reaction (⏳ on a waiting question)
	// and an m.room.redaction of her own event (taking ⏳ away again).
	Message, Reaction, Redaction int
}

// Can reports whether Lisa's level reaches need.
func (p Powers) Can(need int) bool { return p.Creator || p.User >= need }

// Powers reads room's m.room.power_levels (and m.room.create, for room
// versions where creators have unlimited power) and returns what Lisa,
// the client's user, may send. A room without power levels lets every
// member send anything (levels 0).
func (c *Client) Powers(ctx context.Context, room string) (Powers, error) {
	rid := id.RoomID(room)
	var pl event.PowerLevelsEventContent
	err := c.cli.StateEvent(ctx, rid, event.StatePowerLevels, "", &pl)
	switch {
	case notFound(err):
		return Powers{}, nil
	case err != nil:
		return Powers{}, probeError(ctx, err)
	}
	var create event.CreateEventContent
	if err := c.cli.StateEvent(ctx, rid, event.StateCreate, "", &create); err != nil {
		return Powers{}, probeError(ctx, err)
	}
	if create.SupportsCreatorPower() {
		// In these room versions the room ID is the create event's ID
		// with "!" for "$", and its sender is a creator.
		evt, err := c.cli.GetEvent(ctx, rid, id.EventID("$"+strings.TrimPrefix(room, "!")))
		if err != nil {
			return Powers{}, probeError(ctx, err)
		}
		evt.Content.Parsed = &create
		pl.CreateEvent = evt
	}
	me := c.cli.UserID
	p := Powers{
		User:      pl.GetUserLevel(me),
		Message:   pl.GetEventLevel(event.EventMessage),
		Reaction:  pl.GetEventLevel(event.EventReaction),
		Redaction: pl.GetEventLevel(event.EventRedaction),
	}
	if pl.CreateEvent != nil {
		p.Creator = pl.CreateEvent.Sender == me || slices.Contains(create.AdditionalCreators, me)
	}
	return p, nil
}

// RateLimitOverride is what Synapse's admin API says of a user's message
// rate limit.
type RateLimitOverride struct {
	// Overridden: the user has an override; else the server's rc_message
	// applies.
	Overridden bool
	// MessagesPerSecond and BurstCount are the override (0 and 0: no
	// limit at all).
	MessagesPerSecond, BurstCount float64
}

// RateLimitOverride asks Synapse's admin API (GET
// /_synapse/admin/v1/users/<user>/override_ratelimit; RateLimitRestServlet
// in synapse/rest/admin/users.py, v1.67.0: the requester must be a server
// admin; the answer is {} without an override, else messages_per_second
// and burst_count) about user. A server without that API, or a token that
// is not an admin's, fails with a *ProbeError (404 or 400
// M_UNRECOGNIZED; 403 M_FORBIDDEN).
func (c *Client) RateLimitOverride(ctx context.Context, user string) (RateLimitOverride, error) {
	u := c.cli.BuildURLWithQuery(mautrix.SynapseAdminURLPath{"v1", "users", user, "override_ratelimit"}, nil)
	var resp map[string]any
	if _, err := c.cli.MakeRequest(ctx, http.MethodGet, u, nil, &resp); err != nil {
		return RateLimitOverride{}, probeError(ctx, err)
	}
	mps, ok1 := resp["messages_per_second"].(float64)
	burst, ok2 := resp["burst_count"].(float64)
	if !ok1 && !ok2 {
		return RateLimitOverride{}, nil
	}
	return RateLimitOverride{Overridden: true, MessagesPerSecond: mps, BurstCount: burst}, nil
}
