// Package persistence is Lisa's durable state: room journals and snapshots
// (event sourcing for the room actors), the sync ledger with its per-room
// inboxes, and the ledger of Lisa's own Matrix events.
//
// Two stores implement the same interfaces: Badger (one embedded database)
// for production and Memory for tests. Badger acknowledges a write once it
// is committed (it then survives a kill of the process) and syncs apart
// from commits: inbox removals and snapshots wait for their sync, the sync
// ledger and journal and bot events do not, and Store.Barrier lets a
// caller wait for everything acknowledged up to a point before acting
// outside the store (see groupCommit). A sync covers every Badger log that
// may hold an unsynced commit, including memtable logs set aside when
// full, and the directory when a log appeared (see logSyncer), so a
// returned barrier or durable write survives power loss. The first failed
// sync is permanent (ErrSyncFailed): the store accepts nothing more and
// Badger.Failed tells its owner to stop. docs/architecture.md says what a
// power cut can and cannot take. The conformance
// suite in persistencetest runs against both. Provider adapts a Journal to
// protoactor's persistence plugin.
//
// Retention: routed markers, usage records and budget notices older than
// BadgerOptions.Retention (runtime.retention_days) are removed by
// SweepRetention, in bounded passes a Sweeper runs in the background. A
// marker goes only once the event it names would be refused anyway: the
// sweep raises the stored floor ('w') past the marker's time in the same
// write, and CommitSync routes no event sent before the floor or before
// now minus the retention (see retention.go). Lisa's replies ('b', 'a')
// are kept for ever.
//
// Key layout in Badger (NUL separators keep "rooms/a" from prefix-matching
// "rooms/a/b"; indices are big-endian so iteration is ordered):
//
//	j 0x00 <actor> 0x00 be64(index)  journal event (anypb)
//	s 0x00 <actor> 0x00 be64(index)  snapshot (anypb)
//	c                                sync cursor (SyncCursor)
//	q                                last inbox sequence number
//	i 0x00 <room> 0x00 be64(seq)     inbox entry (Candidate)
//	n 0x00 <room> 0x00 <event>       routed marker: be64(seq) of the entry, be64(origin_server_ts ms) of the event
//	b 0x00 <room> 0x00 <event>       Lisa's own event: ID of the event it answers
//	a 0x00 <room> 0x00 <event>       the event answered: ID of Lisa's event answering it (RepliedTo)
//	x                                clean-stop mark (MarkCleanStop, TakeCleanStop)
//	u 0x00 <day> 0x00 <room> 0x00 <id>  token usage of one LLM request (UsageRecord, JSON)
//	v 0x00 <day> 0x00 <room>         the event that got the day's budget notice (BudgetNotice)
//	f                                the data dir's format: be64(version) (see FormatVersion)
//	w                                retention floor: be64(Unix ms); events sent before it are never routed
//	t                                fingerprint of the last process's Matrix access token (SwapSessionFingerprint)
package persistence
