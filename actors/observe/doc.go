// Package observe makes the actor tree visible: a tracking mailbox that
// counts messages, restarts and failures per actor (protoactor has no
// public API for mailbox lengths), restart counts from supervisor events
// that survive an actor's re-creation, and a receiver middleware that logs
// panic stacks before letting supervision handle them.
package observe
