// Package trail is the event trail: a read model of what became of each
// event the sync saw in an allowed room. It is fed from decisions made
// elsewhere — the sync's classification of each timeline event and the
// room machine's journal events — and holds, per room, a bounded ring of
// recent outcomes in memory (nothing is stored; a restart starts empty).
// It never holds a body, a prompt or a display name: event IDs, senders,
// kinds, times, outcome codes and, for an invocation, its path.
//
// The outcome codes form a closed set (see Outcome); docs/debug-shell.md
// explains each one.
package trail
