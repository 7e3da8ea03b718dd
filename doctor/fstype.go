package doctor

import "fmt"

// fsKind sorts filesystems by where Badger's store is safe.
type fsKind int

const (
	fsLocal     fsKind = iota // a local disk filesystem that journals metadata in order
	fsNetwork                 // a network or cluster filesystem
	fsUserspace               // FUSE: sshfs, s3fs, … or a local one
	fsVolatile                // memory only: gone at reboot
	fsUnordered               // local, but not known to commit metadata in order
)

// filesystem is a filesystem's name and kind.
type filesystem struct {
	name string
	kind fsKind
}

// Filesystem magic numbers (statfs f_type) from Linux's
// include/uapi/linux/magic.h, and of the network filesystems that are
// modules outside it (Lustre, GPFS).
var filesystems = map[uint32]filesystem{
	0xEF53:     {"ext2/3/4", fsLocal},
	0x58465342: {"xfs", fsLocal},
	0x9123683E: {"btrfs", fsLocal},
	0x01021994: {"tmpfs", fsVolatile},
	0x794C7630: {"overlayfs", fsLocal},
	0x2FC12FC1: {"zfs", fsLocal},
	0xF2F52010: {"f2fs", fsUnordered},
	0x3153464A: {"jfs", fsUnordered},
	0x52654973: {"reiserfs", fsUnordered},
	0x4D44:     {"vfat", fsUnordered},
	0x2011BAB0: {"exfat", fsUnordered},
	0x5346544E: {"ntfs", fsUnordered},
	0x6969:     {"nfs", fsNetwork},
	0x517B:     {"smb", fsNetwork},
	0xFF534D42: {"cifs", fsNetwork},
	0xFE534D42: {"smb2", fsNetwork},
	0x00C36400: {"ceph", fsNetwork},
	0x5346414F: {"afs", fsNetwork},
	0x6B414653: {"afs", fsNetwork},
	0x01021997: {"9p", fsNetwork},
	0x73757245: {"coda", fsNetwork},
	0x564C:     {"ncp", fsNetwork},
	0x01161970: {"gfs2", fsNetwork},
	0x7461636F: {"ocfs2", fsNetwork},
	0x0BD00BD0: {"lustre", fsNetwork},
	0x47504653: {"gpfs", fsNetwork},
	0x65735546: {"fuse", fsUserspace},
}

// classify names the filesystem with magic number magic.
func classifyFS(magic uint32) filesystem {
	if f, ok := filesystems[magic]; ok {
		return f
	}
	return filesystem{name: fmt.Sprintf("filesystem type 0x%X", magic), kind: fsUnordered}
}
