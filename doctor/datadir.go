package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/lisabot/lisa/adapters/admin"
	"github.com/lisabot/lisa/persistence"
)

// dataDirSection: Lisa can write her data directory, it is on a local
// filesystem where Badger's lock works, and no other process holds it.
func dataDirSection() Section {
	return Section{Name: "datadir", Checks: []Check{
		{Name: "writable", Run: checkWritable},
		{Name: "filesystem", Run: checkFilesystem},
		{Name: "lock", Run: checkLock},
	}}
}

// existing returns the data directory when it exists, or else the
// directory Lisa will create it in, and whether it exists.
func existing(e *Env) (dir string, exists bool) {
	dir = e.Res.Config.Runtime.DataDir
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return filepath.Dir(dir), false
	}
	return dir, true
}

func checkWritable(_ context.Context, e *Env) []Result {
	dataDir := e.Res.Config.Runtime.DataDir
	dir, exists := existing(e)
	f, err := os.CreateTemp(dir, ".lisa-doctor-*")
	if err == nil {
		_, err = f.WriteString("lisa doctor\n")
		if serr := f.Sync(); err == nil {
			err = serr
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if rerr := os.Remove(f.Name()); err == nil {
			err = rerr
		}
	}
	if err != nil {
		what := dataDir
		if !exists {
			what = fmt.Sprintf("%s, where %s is to be created,", dir, dataDir)
		}
		return []Result{{Status: Failed, Message: fmt.Sprintf("%s is not writable for this user (uid %d): %v", what, os.Geteuid(), unwrapPath(err)),
			Fix: "run lisa doctor as Lisa's user; make the directory hers (chown), or change runtime.data_dir"}}
	}
	if !exists {
		return []Result{{Status: OK, Message: fmt.Sprintf("%s does not exist yet; Lisa creates it in %s, which is writable", dataDir, dir)}}
	}
	return []Result{{Status: OK, Message: fmt.Sprintf("%s is writable (a file was created and removed)", dataDir)}}
}

func checkFilesystem(_ context.Context, e *Env) []Result {
	dir, _ := existing(e)
	fsys, err := filesystemOf(dir)
	if err != nil {
		return []Result{{Status: Warning, Message: fmt.Sprintf("cannot tell the filesystem of %s: %v", dir, err)}}
	}
	switch fsys.kind {
	case fsNetwork:
		return []Result{{Status: Failed, Message: fmt.Sprintf("%s is on %s, a network filesystem: Badger's directory lock and memory-mapped files are not safe there", dir, fsys.name),
			Fix: "put runtime.data_dir on a local filesystem"}}
	case fsUserspace:
		return []Result{{Status: Warning, Message: fmt.Sprintf("%s is on %s (a filesystem in user space, perhaps over the network): Badger's lock may not hold there", dir, fsys.name),
			Fix: "put runtime.data_dir on a local filesystem"}}
	case fsVolatile:
		return []Result{{Status: Warning, Message: fmt.Sprintf("%s is on %s, in memory: Lisa's state is gone at every reboot (she then starts from a new baseline)", dir, fsys.name),
			Fix: "put runtime.data_dir on a disk (ext4, xfs or btrfs)"}}
	case fsUnordered:
		return []Result{{Status: Warning, Message: fmt.Sprintf("%s is on %s: Lisa is power-cut safe on filesystems that commit metadata in order (ext4, xfs, btrfs); Badger does not sync the directory of a new table", dir, fsys.name),
			Fix: "put runtime.data_dir on ext4, xfs or btrfs"}}
	}
	return []Result{{Status: OK, Message: fmt.Sprintf("%s is on %s, a local filesystem", dir, fsys.name)}}
}

func checkLock(_ context.Context, e *Env) []Result {
	dataDir := e.Res.Config.Runtime.DataDir
	dir, exists := existing(e)
	if !exists {
		return []Result{{Status: OK, Message: fmt.Sprintf("%s does not exist yet, so no other Lisa uses it", dataDir)}}
	}
	st, err := persistence.ProbeLock(dir)
	switch {
	case err != nil:
		return []Result{{Status: Failed, Message: fmt.Sprintf("file locks do not work in %s (%v): Badger cannot open its store there", dir, unwrapPath(err)),
			Fix: "put runtime.data_dir on a local filesystem"}}
	case st.Held && admin.Serving(e.Res.Config.Runtime.AdminSocket):
		return []Result{{Status: OK, Message: fmt.Sprintf("%s is in use by the Lisa of this configuration (pid %d, serving %s)",
			dir, st.PID, e.Res.Config.Runtime.AdminSocket)}}
	case st.Held && st.PID != 0:
		return []Result{{Status: Warning, Message: fmt.Sprintf("%s is held by process %d (its LOCK file): while it runs, no other Lisa can start on this directory", dir, st.PID),
			Fix: "nothing if that is the running Lisa; otherwise stop it, or give this Lisa her own runtime.data_dir"}}
	case st.Held:
		return []Result{{Status: Warning, Message: fmt.Sprintf("%s is held by another process: while it runs, no other Lisa can start on this directory", dir),
			Fix: "nothing if that is the running Lisa; otherwise stop it, or give this Lisa her own runtime.data_dir"}}
	}
	return []Result{{Status: OK, Message: fmt.Sprintf("%s is not held by any other process", dir)}}
}

// unwrapPath drops the path (already named) from a *fs.PathError.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
