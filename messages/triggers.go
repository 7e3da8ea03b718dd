package messages

// Triggers of the inbox candidates that carry no message but a change of
// a room's permissions as far as Lisa's replies go: the sync routes them
// to the room with its cursor, like invocations, and the room releases
// the replies it holds because the homeserver refused them (M_FORBIDDEN).
const (
	// TriggerPowerLevels: the room's m.room.power_levels changed.
	TriggerPowerLevels = "power_levels"
	// TriggerMembership: Lisa's own m.room.member event changed (she
	// joined again, was invited, …).
	TriggerMembership = "membership"
)
