package persistence

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Badger's log files: memtable write-ahead logs and value logs.
const (
	memLogExt   = ".mem"
	valueLogExt = ".vlog"
)

// logSyncer makes every commit Badger acknowledged durable, whatever
// Badger did meanwhile. Badger v4.9.6's DB.Sync syncs only the active
// memtable's log and the newest value log; a memtable set aside when it
// filled up keeps the commits that landed in it after its last sync only
// in the page cache until it becomes a table, and a value log rotated out
// likewise. A power failure in that window would cut the journal in the
// middle (a gap: the room never starts again) or drop a mention behind a
// cursor that survived.
//
// So sync lists the store's log files and fsyncs:
//   - the newest memtable log and the newest value log (the ones being
//     written), every time;
//   - every older one once, the first time sync sees it set aside (Badger
//     writes a log only while it is the newest: it creates the next one
//     before the first write that does not fit, in its single writer);
//   - the directory, whenever a log file appeared since the last sync, so
//     that the new file's name is durable too (POSIX; ext4 would commit
//     it with the file's own fsync, other file systems need not).
//
// A log that disappears was flushed into a table first (Badger writes the
// table, syncs its data, records it in its synced manifest, and only then
// deletes the log). Tables, the manifest and the key registry are synced
// by Badger itself; a new table's directory entry is not, so it relies on
// a file system that commits metadata in order (ext4, xfs, btrfs; see
// docs/architecture.md).
//
// sync is called by one goroutine at a time (groupCommit's syncer).
type logSyncer struct {
	dir   string
	files map[string]*os.File // open log files by name
	done  map[string]bool     // set-aside logs synced since they stopped growing
}

func newLogSyncer(dir string) *logSyncer {
	return &logSyncer{dir: dir, files: map[string]*os.File{}, done: map[string]bool{}}
}

// sync fsyncs every log that may hold a commit not yet on stable storage,
// and the directory if a log file is new. The first error is returned.
func (l *logSyncer) sync() error {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", l.dir, err)
	}
	present := map[string]bool{}
	newest := map[string]int{}
	var names []string
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if ext != memLogExt && ext != valueLogExt {
			continue
		}
		fid, err := strconv.Atoi(strings.TrimSuffix(name, ext))
		if err != nil {
			continue
		}
		present[name] = true
		names = append(names, name)
		if fid >= newest[ext] {
			newest[ext] = fid
		}
	}
	sort.Strings(names)
	// Forget logs that are gone.
	for name, f := range l.files {
		if !present[name] {
			_ = f.Close()
			delete(l.files, name)
			delete(l.done, name)
		}
	}
	appeared := false
	for _, name := range names {
		ext := filepath.Ext(name)
		fid, _ := strconv.Atoi(strings.TrimSuffix(name, ext))
		active := fid == newest[ext]
		if !active && l.done[name] {
			continue
		}
		f := l.files[name]
		if f == nil {
			f, err = os.Open(filepath.Join(l.dir, name))
			if errors.Is(err, fs.ErrNotExist) {
				continue // flushed into a table and removed since the listing
			}
			if err != nil {
				return fmt.Errorf("open %s: %w", name, err)
			}
			l.files[name] = f
			appeared = true
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", name, err)
		}
		if !active {
			l.done[name] = true
		}
	}
	if appeared {
		if err := syncDir(l.dir); err != nil {
			return err
		}
	}
	return nil
}

// close closes the open log files.
func (l *logSyncer) close() {
	for name, f := range l.files {
		_ = f.Close()
		delete(l.files, name)
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
