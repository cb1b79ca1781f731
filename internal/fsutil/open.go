package fsutil

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

var (
	// ErrNotRegular is wrapped by OpenRegular's error for a directory, a
	// named pipe, a device, a socket: anything but a regular file.
	ErrNotRegular = errors.New("not a regular file")
	// ErrOutside is wrapped by OpenRegular's error for a path that a
	// symbolic link takes out of the directory it was given.
	ErrOutside = errors.New("leaves its directory")
)

// OpenRegular opens dir/name for reading if it is a regular file, or a
// symbolic link to one inside dir, and returns it with its FileInfo. It
// looks before it opens, so that a named pipe where a file is expected is
// an error rather than an open that waits forever, and a device an error
// rather than an endless read. name may have several slash-separated
// elements; a path that a symbolic link (of any element) takes out of dir
// is an error wrapping ErrOutside, anything but a regular file one wrapping
// ErrNotRegular. Both name the path; so do the errors of os.Lstat and
// os.Open, which wrap fs.ErrNotExist for a missing file.
func OpenRegular(dir, name string) (*os.File, fs.FileInfo, error) {
	p := filepath.Join(dir, filepath.FromSlash(name))
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, nil, err
	}
	open := p
	if fi.Mode()&fs.ModeSymlink != 0 || strings.ContainsRune(filepath.ToSlash(filepath.Clean(name)), '/') {
		// A link, or a path through directories that may be links:
		// where does it really lead?
		if open, err = inside(dir, p); err != nil {
			return nil, nil, err
		}
		if fi, err = os.Lstat(open); err != nil {
			return nil, nil, err
		}
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s is %s: %w", p, kind(fi.Mode()), ErrNotRegular)
	}
	f, err := os.Open(open)
	if err != nil {
		return nil, nil, err
	}
	// Something may have replaced the file between the look and the open.
	got, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !os.SameFile(fi, got) {
		f.Close()
		return nil, nil, fmt.Errorf("%s changed while it was being opened", p)
	}
	return f, got, nil
}

// ReadRegular reads dir/name whole, if it is a regular file as OpenRegular
// says.
func ReadRegular(dir, name string) ([]byte, error) {
	f, _, err := OpenRegular(dir, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// ReadRegularAtMost is ReadRegular for a file that must hold at most limit
// bytes (see ReadAtMost).
func ReadRegularAtMost(dir, name string, limit int64) ([]byte, error) {
	f, _, err := OpenRegular(dir, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAtMost(f, filepath.Join(dir, filepath.FromSlash(name)), limit)
}

// ReadAtMost reads the file f, at path, whole if it holds at most limit
// bytes. A larger file is an error naming path and the limit, "damaged?",
// for the small metadata files it is meant for, which no real file makes
// that large: it is refused by its size without being read, and memory
// never holds more than limit+1 bytes of it, even if it grows meanwhile.
func ReadAtMost(f *os.File, path string, limit int64) ([]byte, error) {
	tooLarge := fmt.Errorf("%s is over %d bytes: damaged?", path, limit)
	if fi, err := f.Stat(); err == nil && fi.Size() > limit {
		return nil, tooLarge
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, tooLarge
	}
	return b, nil
}

// Inside checks that p, a path under dir, leads to a file or directory
// under dir once its symbolic links are resolved: an error wrapping
// ErrOutside names both when a link takes it out. A path that does not
// resolve (a dangling link) is an error wrapping fs.ErrNotExist.
func Inside(dir, p string) error {
	_, err := inside(dir, p)
	return err
}

// inside resolves the symbolic links of p, a path under dir, and returns
// the file it leads to if that is still under dir.
func inside(dir, p string) (string, error) {
	target, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	rel, err := filepath.Rel(root, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%s leads to %s, outside %s: %w", p, target, dir, ErrOutside)
	}
	return target, nil
}

// kind names what a file mode says a file is.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return fmt.Sprintf("of type %v", m.Type())
}
