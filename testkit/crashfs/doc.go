// Package crashfs is a FUSE file system for power-loss tests. It passes
// every operation through to a backing directory and records, in order,
// what reached it: data written (page by page), size changes, creations,
// removals, renames, and the fsyncs of files and directories. From that
// record it builds the image stable storage would hold had the power
// failed after any prefix of it, and it can make fsync fail on demand.
//
// The stable-storage model follows ext4 in its default data=ordered mode:
//
//   - A file's data reaches stable storage when that file is fsynced.
//     Pages written since its last fsync may or may not have been written
//     back; an image keeps each such page with a chosen probability
//     (0 keeps none: the worst case).
//   - Metadata — which names exist, and file sizes — is journaled in one
//     order: every metadata change before an fsync of any file or
//     directory is stable once that fsync returns (ext4 commits the
//     running journal transaction, which holds them all).
//
// A stricter POSIX model (a new name stable only after its directory is
// fsynced) would fail Badger itself, which creates tables without syncing
// their directory before naming them in its manifest; that is why the
// model is ext4's, and why callers that want to check their own directory
// syncs can read the operation log (Ops).
//
// Mounting needs /dev/fuse and root (go-fuse mounts directly). Tests that
// use it call Require, which skips with one line unless
// LISA_REQUIRE_FUSE=1 makes a missing FUSE a failure.
package crashfs
