package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lisabot/lisa/adapters/admin"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/persistence"
)

// backupTimeout bounds a backup the running daemon writes: the admin
// socket waits for its answer that long.
const backupTimeout = 30 * time.Minute

// storePaths are the data dir and admin socket a configuration names,
// absolute (relative ones are relative to the configuration file). No
// secret is read: a backup needs none.
func storePaths(c *cli, cfgPath string) (dataDir, socket string, err error) {
	if cfgPath == "" {
		return "", "", errors.New("the --config flag is required")
	}
	cfg, err := config.Load(cfgPath, c.getenv)
	if err != nil {
		return "", "", err
	}
	cfg = cfg.WithDefaults()
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(filepath.Dir(cfgPath), p)
	}
	dataDir, socket = abs(cfg.Runtime.DataDir), abs(cfg.Runtime.AdminSocket)
	if dataDir == "" {
		return "", "", errors.New("runtime.data_dir is not set")
	}
	return dataDir, socket, nil
}

// backupCmd is `lisa backup --config FILE --to PATH`: a consistent
// snapshot of Lisa's store in a new file. A running Lisa writes it herself
// (asked over the admin socket: Badger allows one process per data dir);
// a stopped one is opened here.
func backupCmd(_ context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "backup", "--config FILE --to PATH")
	cfgPath := fs.String("config", "", "the configuration `FILE` (to find the data dir and the admin socket)")
	to := fs.String("to", "", "the new backup `PATH` (must not exist)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *to == "" {
		fmt.Fprintln(c.stderr, "lisa backup: the --to flag is required")
		fs.Usage()
		return exitUsage
	}
	dataDir, socket, err := storePaths(c, *cfgPath)
	if err != nil {
		fmt.Fprintf(c.stderr, "lisa backup: %v\n", err)
		return exitUsage
	}
	target, err := filepath.Abs(*to)
	if err != nil {
		fmt.Fprintf(c.stderr, "lisa backup: %v\n", err)
		return exitUsage
	}
	var info persistence.BackupInfo
	if socket != "" && admin.Serving(socket) {
		info, err = backupRunning(socket, target)
	} else {
		info, err = backupStopped(dataDir, target)
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "lisa backup: %v\n", err)
		return exitFailure
	}
	b, _ := json.Marshal(info)
	fmt.Fprintln(c.stdout, string(b))
	return exitOK
}

// backupRunning asks the running Lisa at socket to write the backup.
func backupRunning(socket, target string) (persistence.BackupInfo, error) {
	var info persistence.BackupInfo
	cl, err := admin.Dial(socket, 2*time.Second)
	if err != nil {
		return info, fmt.Errorf("Lisa is running but her admin socket does not answer: %w", err)
	}
	defer cl.Close()
	cl.SetCallTimeout(backupTimeout)
	data, err := cl.Call("backup", target)
	if err != nil {
		return info, err
	}
	err = json.Unmarshal(data, &info)
	return info, err
}

// backupStopped opens the store of a Lisa that is not running and writes
// the backup. A data dir that does not exist or is empty is refused, not
// created.
func backupStopped(dataDir, target string) (persistence.BackupInfo, error) {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return persistence.BackupInfo{}, fmt.Errorf("the data dir: %w", err)
	}
	if len(entries) == 0 {
		return persistence.BackupInfo{}, fmt.Errorf("the data dir %s is empty: nothing to back up", dataDir)
	}
	store, err := persistence.OpenBadger(dataDir, persistence.BadgerOptions{})
	if err != nil {
		return persistence.BackupInfo{}, fmt.Errorf("%w (is Lisa running without her admin socket?)", err)
	}
	info, err := store.BackupTo(target)
	if cerr := store.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return info, err
}

// restoreCmd is `lisa restore --config FILE --from PATH`: the backup put
// into the configured data dir, which must be empty or absent.
func restoreCmd(_ context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "restore", "--config FILE --from PATH")
	cfgPath := fs.String("config", "", "the configuration `FILE` (to find the data dir)")
	from := fs.String("from", "", "the backup `PATH` to restore")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *from == "" {
		fmt.Fprintln(c.stderr, "lisa restore: the --from flag is required")
		fs.Usage()
		return exitUsage
	}
	dataDir, socket, err := storePaths(c, *cfgPath)
	if err != nil {
		fmt.Fprintf(c.stderr, "lisa restore: %v\n", err)
		return exitUsage
	}
	if socket != "" && admin.Serving(socket) {
		fmt.Fprintln(c.stderr, "lisa restore: Lisa is running on this data dir; stop her first")
		return exitFailure
	}
	info, err := persistence.RestoreBackup(dataDir, *from, persistence.BadgerOptions{})
	if err != nil {
		fmt.Fprintf(c.stderr, "lisa restore: %v\n", err)
		return exitFailure
	}
	b, _ := json.Marshal(info)
	fmt.Fprintln(c.stdout, string(b))
	fmt.Fprintf(c.stderr, "lisa restore: restored into %s. On her next start Lisa reads every room back from the backup's cursor and records the questions she answered after the backup as answered, without answering them again.\n", dataDir)
	return exitOK
}
