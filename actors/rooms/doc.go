// Package rooms implements the room supervisor: it spawns one persistent
// room actor per allowed room (named by the room ID, which is also the
// journal key), forwards nudges to them, limits how many rooms run an
// invocation at once, and supervises them itself. A room that fails is
// restarted (replaying its journal) a bounded number of times within a
// window; after that it is stopped and respawned later with backoff. A
// failure in one room never touches another.
//
// It also knows which rooms have work in hand (a slot, or a reply being
// sent or looked up, as each room reports with RoomBusy), so a graceful
// shutdown asks it once (IdleRequest) instead of asking every room.
package rooms
