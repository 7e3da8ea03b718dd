package persistence

// NewLogSyncerForTest returns the sync a Badger store in dir would run
// (see logSyncer) and a function that closes its files.
func NewLogSyncerForTest(dir string) (sync func() error, close func()) {
	l := newLogSyncer(dir)
	return l.sync, l.close
}
