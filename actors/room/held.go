package room

import (
	"time"

	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/messages/roompb"
)

// Replies the homeserver refused with M_FORBIDDEN wait for the room to be
// fixed: they are held (ReplyForbidden) out of the queue, and released
// (HeldReleased) when the sync shows a change of the room's power levels
// or of Lisa's membership, or when the operator asks (ResendHeld). A
// released reply goes back into the queue behind the head and is looked
// up on the homeserver before it is sent again with its original
// transaction ID, so it is never sent twice. At most HeldLimit are held,
// none longer than HeldTTL; what is beyond is dropped (HeldDropped) with
// a log line.

// ResendHeld: the operator asked for the room's held replies to be sent
// again (`resend` in lisa shell).
type ResendHeld struct{}

// HeldExpiryDue: the oldest held reply may have outlived HeldTTL.
type HeldExpiryDue struct{}

func (ResendHeld) isInput()    {}
func (HeldExpiryDue) isInput() {}

// isPermissionChange reports whether c carries a change of the room's
// power levels or of Lisa's membership rather than a message.
func isPermissionChange(c *roompb.Candidate) bool {
	switch c.GetTrigger() {
	case messages.TriggerPowerLevels, messages.TriggerMembership:
		return true
	}
	return false
}

// OutcomeNothingHeld is the outcome of a change of the room's permissions
// while no reply is held: nothing to do.
const OutcomeNothingHeld = "nothing_held"

// permissionChange takes in a change of the room's permissions: the held
// replies that are still fresh are released, taking the change's inbox
// entry in the same write. released says whether an earlier entry of
// the same step released them already.
func (m *Machine) permissionChange(out *Output, c *roompb.Candidate, released bool, ms int64) bool {
	ids := m.releasable(ms)
	if released || len(ids) == 0 {
		out.effect(RemoveInbox{EventID: c.GetEventId(), Outcome: OutcomeNothingHeld})
		return released
	}
	out.event(&roompb.HeldReleased{EventIds: ids, Reason: c.GetTrigger(), RoomId: m.policy.RoomID,
		CauseEventId: c.GetEventId(), ReleasedAtMs: ms})
	return true
}

// resendHeld releases the held replies that are still fresh, at the
// operator's request.
func (m *Machine) resendHeld(ms int64) Output {
	var out Output
	if ids := m.releasable(ms); len(ids) > 0 {
		out.event(&roompb.HeldReleased{EventIds: ids, Reason: ReleaseOperator, ReleasedAtMs: ms})
	}
	return out
}

// Releasable counts the held replies a release at now would send again:
// those not older than HeldTTL (older ones are dropped).
func (m *Machine) Releasable(now time.Time) int { return len(m.releasable(now.UnixMilli())) }

func (m *Machine) releasable(ms int64) []string {
	var ids []string
	for _, inv := range m.Held {
		if !heldExpired(inv, ms) {
			ids = append(ids, inv.EventID())
		}
	}
	return ids
}

func heldExpired(inv *Invocation, ms int64) bool {
	return ms-inv.ForbiddenAtMs >= HeldTTL.Milliseconds()
}

// pumpHeld drops the held replies beyond HeldLimit (the oldest) and those
// older than HeldTTL, each with a HeldDropped, and reports whether it
// did; otherwise it makes sure a HeldExpiryDue is scheduled for the
// oldest held reply.
func (m *Machine) pumpHeld(out *Output, now time.Time) bool {
	ms := now.UnixMilli()
	excess := len(m.Held) - HeldLimit
	dropped := false
	for _, inv := range m.Held {
		switch {
		case excess > 0:
			excess--
			out.event(&roompb.HeldDropped{EventId: inv.EventID(), Reason: HeldOverflow, DroppedAtMs: ms})
		case heldExpired(inv, ms):
			out.event(&roompb.HeldDropped{EventId: inv.EventID(), Reason: HeldExpired, DroppedAtMs: ms})
		default:
			continue
		}
		dropped = true
	}
	if dropped || len(m.Held) == 0 {
		return dropped
	}
	due := m.Held[0].ForbiddenAtMs + HeldTTL.Milliseconds()
	for _, inv := range m.Held[1:] {
		due = min(due, inv.ForbiddenAtMs+HeldTTL.Milliseconds())
	}
	if m.heldExpiry != due {
		m.heldExpiry = due
		out.effect(Schedule{After: time.Duration(due-ms) * time.Millisecond, Input: HeldExpiryDue{}})
	}
	return false
}
