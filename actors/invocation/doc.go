// Package invocation implements the invocation child: a short-lived actor
// that runs one attempt of one invocation and reports the result to its
// room. The work runs in a goroutine the actor owns, with a context that is
// cancelled when the actor stops or restarts, so Receive never blocks.
package invocation
