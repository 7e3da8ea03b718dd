// Package room implements the persistent room actor: one per allowed Matrix
// room, named by the room ID, event-sourced through protoactor's persistence
// plugin.
//
// The logic is a pure state machine (Machine): Decide turns an input into
// journal events and effects, Apply folds an event into the state, and Pump
// moves the queue forward. The actor in actor.go is a thin adapter that
// persists events before applying them and performs effects. Time is an
// input, never read inside the machine, so replays and golden tests are
// exact.
package room
