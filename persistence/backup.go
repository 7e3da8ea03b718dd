package persistence

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// A backup file is
//
//	backupMagic                         one line naming the layout
//	Badger's backup stream              DB.Backup: every live key at one read timestamp
//	be64(stream length) sha256(stream)  the trailer, 40 bytes
//	trailerMagic                        8 bytes
//
// The trailer lets a restore refuse a file that was cut short or changed
// before it writes anything: Badger's stream alone would load a prefix
// that ends between two chunks without complaint.
const (
	backupMagic  = "lisa-backup 1\n"
	trailerMagic = "LISA-END"
	trailerSize  = int64(8 + sha256.Size + len(trailerMagic))
)

// ErrNotBackup is returned, wrapped, for a file that is not a whole Lisa
// backup (another file, or one cut short or altered).
var ErrNotBackup = errors.New("not a whole Lisa backup")

// ErrDataDirInUse is returned, wrapped, by RestoreBackup for a data dir
// that is not empty: a restore never mixes a backup with other state.
var ErrDataDirInUse = errors.New("the data dir is not empty")

// BackupInfo describes a backup file.
type BackupInfo struct {
	// Path is the backup file.
	Path string `json:"path"`
	// Bytes is the file's size.
	Bytes int64 `json:"bytes"`
	// SHA256 is the hex digest of the Badger stream it holds.
	SHA256 string `json:"sha256"`
	// Took is how long writing or restoring it took.
	Took time.Duration `json:"took_ns"`
}

// BackupTo writes a consistent snapshot of the whole store to a new file
// at path while the store is in use: Badger's backup stream reads every
// key at one timestamp, so the snapshot is one moment of the store, never
// a mix of two. The file is written beside path, synced and then linked
// into place; an existing path is refused, never overwritten. The file
// holds room messages: it is created with mode 0600.
func (s *Badger) BackupTo(path string) (BackupInfo, error) {
	start := time.Now()
	info := BackupInfo{Path: path}
	if s.closed.Load() {
		return info, ErrClosed
	}
	if _, err := os.Lstat(path); err == nil {
		return info, fmt.Errorf("persistence: backup: %s exists; name a new file", path)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-*")
	if err != nil {
		return info, fmt.Errorf("persistence: backup: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the link, or on failure
	ok := false
	defer func() {
		if !ok {
			_ = tmp.Close()
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return info, fmt.Errorf("persistence: backup: %w", err)
	}
	bw := bufio.NewWriterSize(tmp, 256<<10)
	if _, err := bw.WriteString(backupMagic); err != nil {
		return info, fmt.Errorf("persistence: backup: %w", err)
	}
	cw := &countingHash{w: bw, h: sha256.New()}
	if _, err := s.db.Backup(cw, 0); err != nil {
		return info, fmt.Errorf("persistence: backup stream: %w", err)
	}
	sum := cw.h.Sum(nil)
	trailer := binary.BigEndian.AppendUint64(nil, uint64(cw.n))
	trailer = append(append(trailer, sum...), trailerMagic...)
	if _, err := bw.Write(trailer); err != nil {
		return info, fmt.Errorf("persistence: backup: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return info, fmt.Errorf("persistence: backup: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return info, fmt.Errorf("persistence: backup: sync: %w", err)
	}
	ok = true
	if err := tmp.Close(); err != nil {
		return info, fmt.Errorf("persistence: backup: %w", err)
	}
	// Link, not rename: a file that appeared at path meanwhile stays.
	if err := os.Link(tmp.Name(), path); err != nil {
		return info, fmt.Errorf("persistence: backup: %w", err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return info, fmt.Errorf("persistence: backup: %w", err)
	}
	info.Bytes = int64(len(backupMagic)) + cw.n + trailerSize
	info.SHA256 = fmt.Sprintf("%x", sum)
	info.Took = time.Since(start)
	return info, nil
}

// CheckBackup verifies that path is a whole Lisa backup and returns its
// description, without restoring it.
func CheckBackup(path string) (BackupInfo, error) {
	f, _, info, err := openBackup(path)
	if err != nil {
		return info, err
	}
	return info, f.Close()
}

// openBackup opens path and checks its magic line, trailer and digest. It
// returns the open file and a reader of exactly its Badger stream.
func openBackup(path string) (*os.File, *io.SectionReader, BackupInfo, error) {
	info := BackupInfo{Path: path}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, info, fmt.Errorf("persistence: restore: %w", err)
	}
	fail := func(why string) (*os.File, *io.SectionReader, BackupInfo, error) {
		_ = f.Close()
		return nil, nil, info, fmt.Errorf("persistence: %s: %w (%s)", path, ErrNotBackup, why)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, info, fmt.Errorf("persistence: restore: %w", err)
	}
	info.Bytes = st.Size()
	head := make([]byte, len(backupMagic))
	if _, err := f.ReadAt(head, 0); err != nil || string(head) != backupMagic {
		return fail("it does not begin as one")
	}
	if st.Size() < int64(len(backupMagic))+trailerSize {
		return fail("it is too short")
	}
	trailer := make([]byte, trailerSize)
	if _, err := f.ReadAt(trailer, st.Size()-trailerSize); err != nil {
		return fail("its end cannot be read")
	}
	if string(trailer[8+sha256.Size:]) != trailerMagic {
		return fail("it does not end as one: cut short?")
	}
	n := int64(binary.BigEndian.Uint64(trailer[:8]))
	if n != st.Size()-int64(len(backupMagic))-trailerSize {
		return fail("its length does not match its trailer: cut short?")
	}
	stream := io.NewSectionReader(f, int64(len(backupMagic)), n)
	h := sha256.New()
	if _, err := io.Copy(h, stream); err != nil {
		return fail("it cannot be read: " + err.Error())
	}
	if !bytes.Equal(h.Sum(nil), trailer[8:8+sha256.Size]) {
		return fail("its digest does not match: altered or damaged")
	}
	info.SHA256 = fmt.Sprintf("%x", trailer[8:8+sha256.Size])
	return f, io.NewSectionReader(f, int64(len(backupMagic)), n), info, nil
}

// RestoreBackup restores the backup at path into dir, which must not
// exist or be empty: it refuses any other, so a restore never mixes two
// states (and never runs under a Lisa that has dir open). The backup is
// checked whole before anything is written. The restored store carries
// no clean-stop mark, so the next start reads every room back as after a
// crash; and Lisa, starting on a store that may be older than the room,
// looks for her own replies since its cursor before she answers anything
// queued in it (room.CheckAnswered).
func RestoreBackup(dir, path string, o BadgerOptions) (BackupInfo, error) {
	start := time.Now()
	if err := emptyDir(dir); err != nil {
		return BackupInfo{Path: path}, err
	}
	f, stream, info, err := openBackup(path)
	if err != nil {
		return info, err
	}
	defer f.Close()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return info, fmt.Errorf("persistence: restore: %w", err)
	}
	// Every write of the restore is synced: Close then leaves nothing
	// that a power cut could take.
	db, err := badger.Open(badgerOptions(dir, o).WithSyncWrites(true))
	if err != nil {
		return info, fmt.Errorf("persistence: restore: open %s: %w", dir, err)
	}
	if err := db.Load(stream, 256); err != nil {
		_ = db.Close()
		return info, fmt.Errorf("persistence: restore: load %s: %w", path, err)
	}
	// A backup of a newer format is not put in place: this build would
	// refuse the data dir at every start. The dir was empty before.
	if format, ferr := readFormat(db); ferr != nil || format > FormatVersion {
		_ = db.Close()
		_ = clearDir(dir)
		if ferr != nil {
			return info, fmt.Errorf("persistence: restore: %w", ferr)
		}
		return info, fmt.Errorf("%w: the backup %s has format %d; this lisa reads formats up to %d: restore it with the lisa that wrote it or a newer one",
			ErrNewerFormat, path, format, FormatVersion)
	}
	err = db.Update(func(txn *badger.Txn) error { return txn.Delete(cleanStopKey) })
	if err == nil {
		err = db.Sync()
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return info, fmt.Errorf("persistence: restore: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return info, fmt.Errorf("persistence: restore: %w", err)
	}
	info.Took = time.Since(start)
	return info, nil
}

// emptyDir returns nil if dir does not exist or is an empty directory.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("persistence: restore: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("persistence: restore into %s: %w (%d entries): restore into a new directory, or move this one aside", dir, ErrDataDirInUse, len(entries))
	}
	return nil
}

// countingHash writes to w and hashes and counts what it wrote.
type countingHash struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// clearDir removes everything in dir, which a failed restore filled.
func clearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
