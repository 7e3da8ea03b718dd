// Package syncer implements the sync actor: Matrix intake, one /sync at a
// time with the committed cursor. The first sync without a cursor only
// records a baseline; afterwards each response's candidates and the new
// cursor are committed in one transaction before any room is nudged, so a
// kill never loses a mention and a repeated response never creates a
// second invocation. Failures back off (honouring the server's
// retry_after_ms, with jitter), a rejected cursor triggers a new baseline,
// and a watchdog replaces a request that made no progress.
package syncer
