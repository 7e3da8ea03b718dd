package crashfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lisabot/lisa/testkit/need"
)

// RequireEnv names the variable that turns a missing FUSE into a test
// failure instead of a skip (.ci/run sets it).
const RequireEnv = "LISA_REQUIRE_FUSE"

// Require skips t with one line when FUSE cannot be mounted here (no
// /dev/fuse, or not root), unless RequireEnv is 1, which fails it.
func Require(t testing.TB) {
	t.Helper()
	fuse := need.Tool{Name: "FUSE", RequireEnv: RequireEnv, Fix: "run as root with /dev/fuse (go-fuse mounts directly; no package needed)",
		Check: func() string {
			if err := usable(); err != nil {
				return err.Error()
			}
			return ""
		}}
	fuse.Need(t)
}

func usable() error {
	if os.Geteuid() != 0 {
		return errors.New("not root")
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open /dev/fuse: %w", err)
	}
	return f.Close()
}

// OpKind says what an Op recorded.
type OpKind int

// The kinds of recorded operations.
const (
	// OpWrite is data written to a file at an offset.
	OpWrite OpKind = iota + 1
	// OpSize is a size change (truncate, or fallocate that extends).
	OpSize
	// OpCreate is a new file or directory (Dir says which).
	OpCreate
	// OpRemove is an unlink or rmdir.
	OpRemove
	// OpRename moves Path to To.
	OpRename
	// OpFsync is an fsync (or fdatasync) of a file that returned success.
	OpFsync
	// OpFsyncDir is an fsync of a directory that returned success.
	OpFsyncDir
)

// String returns the kind's name.
func (k OpKind) String() string {
	switch k {
	case OpWrite:
		return "write"
	case OpSize:
		return "size"
	case OpCreate:
		return "create"
	case OpRemove:
		return "remove"
	case OpRename:
		return "rename"
	case OpFsync:
		return "fsync"
	case OpFsyncDir:
		return "fsyncdir"
	}
	return fmt.Sprintf("op(%d)", int(k))
}

// Op is one operation that reached the file system. Paths are relative
// to the mount's root.
type Op struct {
	Kind OpKind
	Ino  uint64 // the file's inode (write, size, create, fsync)
	Path string // the file's path when the operation ran
	To   string // rename target
	Dir  bool   // create: a directory
	Off  int64  // write offset
	Data []byte // write data (a copy)
	Size int64  // size change: the new size
}

// FS is a mounted crashfs.
type FS struct {
	// Dir is the mount point: use paths under it.
	Dir string

	backing  string
	server   *fuse.Server
	mu       sync.Mutex
	ops      []Op
	failSync atomic.Bool
}

// Mount mounts a crashfs at mountpoint (an existing empty directory)
// over backing (an existing directory that receives every operation).
// Unmount it when done.
func Mount(mountpoint, backing string) (*FS, error) {
	f := &FS{Dir: mountpoint, backing: backing}
	root := &node{LoopbackNode: &fs.LoopbackNode{RootData: &fs.LoopbackRoot{Path: backing}}, fs: f}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, fmt.Errorf("crashfs: %w", err)
	}
	root.RootData.Dev = uint64(st.Dev)
	root.RootData.RootNode = root
	zero := time.Duration(0)
	server, err := fs.Mount(mountpoint, root, &fs.Options{
		// No attribute or entry caching: sizes and names are what the
		// backing directory says, always.
		AttrTimeout:  &zero,
		EntryTimeout: &zero,
		MountOptions: fuse.MountOptions{
			FsName:            "crashfs",
			Name:              "crashfs",
			DirectMountStrict: true,
			DisableXAttrs:     true,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("crashfs: mount %s: %w", mountpoint, err)
	}
	f.server = server
	return f, nil
}

// Unmount unmounts the file system and waits for its server to end.
func (f *FS) Unmount() error {
	var err error
	for range 50 {
		if err = f.server.Unmount(); err == nil {
			f.server.Wait()
			return nil
		}
		// EBUSY while a killed process's mappings are torn down.
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("crashfs: unmount %s: %w", f.Dir, err)
}

// FailSync makes every later fsync of a file or directory fail with EIO
// (true) or work again (false). A failed fsync is not recorded.
func (f *FS) FailSync(fail bool) { f.failSync.Store(fail) }

// Len returns how many operations are recorded so far.
func (f *FS) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ops)
}

// Ops returns the first n recorded operations (all if n < 0). The
// returned slice must not be modified.
func (f *FS) Ops(n int) []Op {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n < 0 || n > len(f.ops) {
		n = len(f.ops)
	}
	return f.ops[:n:n]
}

// Reset forgets every recorded operation.
func (f *FS) Reset() {
	f.mu.Lock()
	f.ops = nil
	f.mu.Unlock()
}

func (f *FS) record(op Op) {
	f.mu.Lock()
	f.ops = append(f.ops, op)
	f.mu.Unlock()
}

// node is a loopback node that records what reaches it.
type node struct {
	*fs.LoopbackNode
	fs *FS
}

var (
	_ fs.NodeWrapChilder    = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)

	_ fs.FileGetattrer = (*fileHandle)(nil)
	_ fs.FileSetattrer = (*fileHandle)(nil)
	_ fs.FileReleaser  = (*fileHandle)(nil)
	_ fs.FileFlusher   = (*fileHandle)(nil)
	_ fs.FileReader    = (*fileHandle)(nil)
	_ fs.FileWriter    = (*fileHandle)(nil)
	_ fs.FileFsyncer   = (*fileHandle)(nil)
	_ fs.FileAllocater = (*fileHandle)(nil)
	_ fs.FileLseeker   = (*fileHandle)(nil)

	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileFsyncdirer   = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
)

// WrapChild makes every node below the root a recording node too.
func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), fs: n.fs}
}

func (n *node) rel(name string) string {
	return filepath.Join(n.EmbeddedInode().Path(n.Root()), name)
}

// Create creates a file and records it.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ch, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return ch, fh, fl, errno
	}
	p := n.rel(name)
	ino := ch.StableAttr().Ino
	n.fs.record(Op{Kind: OpCreate, Ino: ino, Path: p})
	return ch, &fileHandle{inner: fh.(*fs.LoopbackFile), ino: ino, path: p, fs: n.fs}, fl, 0
}

// Open opens a file; its handle records writes and fsyncs.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return fh, fl, errno
	}
	p := n.EmbeddedInode().Path(n.Root())
	return &fileHandle{inner: fh.(*fs.LoopbackFile), ino: n.StableAttr().Ino, path: p, fs: n.fs}, fl, 0
}

// Setattr records a size change.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*fileHandle); ok {
		f = h.inner
	}
	errno := n.LoopbackNode.Setattr(ctx, f, in, out)
	if sz, ok := in.GetSize(); ok && errno == 0 {
		n.fs.record(Op{Kind: OpSize, Ino: n.StableAttr().Ino, Path: n.EmbeddedInode().Path(n.Root()), Size: int64(sz)})
	}
	return errno
}

// Unlink removes a file and records it.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	errno := n.LoopbackNode.Unlink(ctx, name)
	if errno == 0 {
		n.fs.record(Op{Kind: OpRemove, Path: n.rel(name)})
	}
	return errno
}

// Rmdir removes a directory and records it.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	errno := n.LoopbackNode.Rmdir(ctx, name)
	if errno == 0 {
		n.fs.record(Op{Kind: OpRemove, Path: n.rel(name), Dir: true})
	}
	return errno
}

// Rename renames and records it.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	errno := n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
	if errno == 0 {
		to := filepath.Join(newParent.EmbeddedInode().Path(n.Root()), newName)
		n.fs.record(Op{Kind: OpRename, Path: n.rel(name), To: to})
	}
	return errno
}

// Mkdir creates a directory and records it.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, errno := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	if errno == 0 {
		n.fs.record(Op{Kind: OpCreate, Ino: ch.StableAttr().Ino, Path: n.rel(name), Dir: true})
	}
	return ch, errno
}

// OpendirHandle opens a directory; its handle records fsyncs.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	h, fl, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return h, fl, errno
	}
	return &dirHandle{inner: h, path: n.EmbeddedInode().Path(n.Root()), fs: n.fs}, fl, 0
}

// fileHandle forwards to a loopback file and records writes, size changes
// and fsyncs. It deliberately does not offer a passthrough descriptor:
// with FUSE passthrough the kernel would write to the backing file
// without telling the recorder.
type fileHandle struct {
	inner *fs.LoopbackFile
	ino   uint64
	path  string
	fs    *FS
}

func (h *fileHandle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.inner.Getattr(ctx, out)
}

func (h *fileHandle) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return h.inner.Setattr(ctx, in, out)
}

func (h *fileHandle) Release(ctx context.Context) syscall.Errno { return h.inner.Release(ctx) }

func (h *fileHandle) Flush(ctx context.Context) syscall.Errno { return h.inner.Flush(ctx) }

func (h *fileHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.inner.Read(ctx, dest, off)
}

func (h *fileHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	n, errno := h.inner.Write(ctx, data, off)
	if errno == 0 && n > 0 {
		h.fs.record(Op{Kind: OpWrite, Ino: h.ino, Path: h.path, Off: off, Data: append([]byte(nil), data[:n]...)})
	}
	return n, errno
}

func (h *fileHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if h.fs.failSync.Load() {
		return syscall.EIO
	}
	errno := h.inner.Fsync(ctx, flags)
	if errno == 0 {
		h.fs.record(Op{Kind: OpFsync, Ino: h.ino, Path: h.path})
	}
	return errno
}

func (h *fileHandle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	errno := h.inner.Allocate(ctx, off, size, mode)
	if errno != 0 {
		return errno
	}
	var out fuse.AttrOut
	if h.inner.Getattr(ctx, &out) == 0 {
		h.fs.record(Op{Kind: OpSize, Ino: h.ino, Path: h.path, Size: int64(out.Size)})
	}
	return 0
}

func (h *fileHandle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return h.inner.Lseek(ctx, off, whence)
}

// dirHandle forwards to a loopback directory stream and records fsyncs.
type dirHandle struct {
	inner fs.FileHandle
	path  string
	fs    *FS
}

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	return d.inner.(fs.FileReaddirenter).Readdirent(ctx)
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.inner.(fs.FileSeekdirer).Seekdir(ctx, off)
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	d.inner.(fs.FileReleasedirer).Releasedir(ctx, flags)
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	if d.fs.failSync.Load() {
		return syscall.EIO
	}
	errno := d.inner.(fs.FileFsyncdirer).Fsyncdir(ctx, flags)
	if errno == 0 {
		d.fs.record(Op{Kind: OpFsyncDir, Path: d.path})
	}
	return errno
}
