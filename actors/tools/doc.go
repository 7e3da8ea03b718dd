// Package tools implements the tool pool: a fixed set of worker actors
// that run tool calls (search, fetch, conversion) one at a time each, fed
// from a FIFO queue whose length is the pool's back-pressure. It is
// written for Lisa instead of using protoactor's router pools, which
// shrink and can panic their senders.
//
// Callers submit work from their own goroutines (never from inside an
// actor's Receive) and wait on a channel; a call whose context ends is
// dropped from the queue, or cancelled while it runs. A worker whose work
// panics reports an error result for that call and is replaced.
package tools
