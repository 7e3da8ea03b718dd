package messages

import (
	"crypto/sha256"
	"encoding/base64"
	"log/slog"
	"strings"
)

// RoomID is a Matrix room ID such as "!abc:example.org".
type RoomID string

// EventID is a Matrix event ID such as "$xyz".
type EventID string

// UserID is a Matrix user ID such as "@lisa:example.org".
type UserID string

// TxnID is the client transaction ID Lisa sends a reply with.
type TxnID string

// LogValue hashes the room ID so logs can correlate rooms without naming
// them.
func (r RoomID) LogValue() slog.Value { return slog.StringValue(Hash(string(r))) }

// LogValue hashes the event ID so logs can correlate events without naming
// them.
func (e EventID) LogValue() slog.Value { return slog.StringValue(Hash(string(e))) }

// Hash returns a short, stable, non-reversible tag for an identifier, for
// use in logs and metrics labels.
func Hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base64.RawURLEncoding.EncodeToString(sum[:])[:12]
}

// ReplyTxnID derives the transaction ID of the reply to event in room. It
// is deterministic, so every attempt to send the same reply, in any
// process, uses the same ID.
func ReplyTxnID(room RoomID, event EventID) TxnID {
	sum := sha256.Sum256([]byte(string(room) + "\x00" + string(event)))
	return TxnID("lisa_" + base64.RawURLEncoding.EncodeToString(sum[:])[:32])
}

// ActorLogID renders an actor path for logs: segments naming a room (they
// start with "!") are replaced by their hash, so "app/rooms/!r:hs/inv-3"
// becomes "app/rooms/<hash>/inv-3".
func ActorLogID(id string) string {
	parts := strings.Split(id, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, "!") {
			parts[i] = Hash(p)
		}
	}
	return strings.Join(parts, "/")
}
