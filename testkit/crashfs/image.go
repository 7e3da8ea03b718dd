package crashfs

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

const pageSize = 4096

// fileState is one inode as the model sees it: its pages as written
// (volatile) and as stable storage holds them (durable).
type fileState struct {
	vol, dur map[int64][]byte // page index → page (nil: a zero page)
	dirty    map[int64]bool   // pages written since the last fsync
	// Size as set by truncate (journaled metadata) and as reached by
	// writes (stable only with the data: ext4 advances the on-disk
	// size when the data is written back).
	volTrunc, volEnd int64
	durTrunc, durEnd int64
}

func newFileState() *fileState {
	return &fileState{vol: map[int64][]byte{}, dur: map[int64][]byte{}, dirty: map[int64]bool{}}
}

func (s *fileState) write(off int64, data []byte) {
	for len(data) > 0 {
		p := off / pageSize
		in := off % pageSize
		n := min(int64(len(data)), pageSize-in)
		page := make([]byte, pageSize)
		if old := s.vol[p]; old != nil {
			copy(page, old)
		}
		copy(page[in:], data[:n])
		s.vol[p] = page
		s.dirty[p] = true
		off += n
		data = data[n:]
	}
	if off > s.volEnd {
		s.volEnd = off
	}
}

func (s *fileState) truncate(size int64) {
	last := (size + pageSize - 1) / pageSize
	for p := range s.vol {
		if p >= last {
			delete(s.vol, p)
			s.dirty[p] = true
		}
	}
	if in := size % pageSize; in != 0 {
		p := size / pageSize
		if old := s.vol[p]; old != nil {
			page := make([]byte, pageSize)
			copy(page, old[:in])
			s.vol[p] = page
			s.dirty[p] = true
		}
	}
	s.volTrunc = size
	s.volEnd = min(s.volEnd, size)
}

// fsync makes every page and the size as written stable.
func (s *fileState) fsync() {
	for p := range s.dirty {
		if page, ok := s.vol[p]; ok {
			s.dur[p] = page // pages are never modified in place
		} else {
			delete(s.dur, p)
		}
	}
	clear(s.dirty)
	s.durTrunc, s.durEnd = s.volTrunc, s.volEnd
}

// Image writes into dst (which must not exist) the files and directories
// stable storage would hold had the power failed right after the first n
// recorded operations. Pages written but not fsynced by then are each
// kept with probability keep, drawn from rng (keep 0: none, the worst
// case; rng may then be nil).
func (f *FS) Image(n int, dst string, keep float64, rng *rand.Rand) error {
	ops := f.Ops(n)
	files := map[uint64]*fileState{}
	state := func(ino uint64) *fileState {
		s := files[ino]
		if s == nil {
			s = newFileState()
			files[ino] = s
		}
		return s
	}
	type entry struct {
		ino uint64
		dir bool
	}
	vol := map[string]entry{}
	dur := map[string]entry{}
	commit := func() { // a journal commit: every name and truncate so far
		clear(dur)
		for k, v := range vol {
			dur[k] = v
		}
		for _, s := range files {
			s.durTrunc = s.volTrunc
		}
	}
	for _, op := range ops {
		switch op.Kind {
		case OpWrite:
			state(op.Ino).write(op.Off, op.Data)
		case OpSize:
			state(op.Ino).truncate(op.Size)
		case OpCreate:
			vol[op.Path] = entry{ino: op.Ino, dir: op.Dir}
			if !op.Dir {
				state(op.Ino)
			}
		case OpRemove:
			delete(vol, op.Path)
			if op.Dir {
				for k := range vol {
					if strings.HasPrefix(k, op.Path+"/") {
						delete(vol, k)
					}
				}
			}
		case OpRename:
			e, ok := vol[op.Path]
			delete(vol, op.To)
			if !ok {
				// Not a file or directory crashfs models (a socket made
				// with mknod, say): it has no content to keep.
				continue
			}
			delete(vol, op.Path)
			vol[op.To] = e
		case OpFsync:
			state(op.Ino).fsync()
			commit()
		case OpFsyncDir:
			commit()
		}
	}
	// Directories first, in path order, then files.
	paths := make([]string, 0, len(dur))
	for p := range dur {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	for _, p := range paths {
		if e := dur[p]; e.dir {
			if err := os.MkdirAll(filepath.Join(dst, p), 0o755); err != nil {
				return err
			}
		}
	}
	for _, p := range paths {
		e := dur[p]
		if e.dir {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, p)), 0o755); err != nil {
			return err
		}
		if err := writeImage(filepath.Join(dst, p), files[e.ino], keep, rng); err != nil {
			return err
		}
	}
	return nil
}

// writeImage writes one file as stable storage holds it.
func writeImage(path string, s *fileState, keep float64, rng *rand.Rand) error {
	pages := map[int64][]byte{}
	for p, page := range s.dur {
		pages[p] = page
	}
	end := s.durEnd
	if keep > 0 {
		order := make([]int64, 0, len(s.dirty))
		for p := range s.dirty {
			order = append(order, p)
		}
		sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
		for _, p := range order {
			if rng.Float64() >= keep {
				continue
			}
			// This page was written back on its own.
			if page, ok := s.vol[p]; ok {
				pages[p] = page
				end = max(end, min((p+1)*pageSize, s.volEnd))
			} else {
				delete(pages, p)
			}
		}
	}
	size := max(s.durTrunc, end)
	out, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	for p, page := range pages {
		if p*pageSize >= size {
			continue
		}
		b := page[:min(pageSize, size-p*pageSize)]
		if _, err := out.WriteAt(b, p*pageSize); err != nil {
			_ = out.Close()
			return err
		}
	}
	if err := out.Truncate(size); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
