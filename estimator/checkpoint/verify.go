package checkpoint

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"

	"gorgonia.org/tensor"
)

// verifyManifest reads back the manifest Save wrote to dir, m: it must
// read back and verify as a reader verifies it, and say what m says.
// writeVariable has read back each variable's file.
func verifyManifest(dir string, m Manifest) error {
	got, _, err := readManifest(dir)
	if err != nil {
		return err
	}
	if got.Step != m.Step || !reflect.DeepEqual(got.Variables, m.Variables) {
		return fmt.Errorf("%s: manifest reads back otherwise than it was written", filepath.Join(dir, ManifestFile))
	}
	return nil
}

// verifyFile reads back the file of entry e in dir (its Bytes set, not
// its SHA256) as a reader reads its size and header, and compares it with
// the bytes writeNPY makes of data (of dtype dt, shape e.Shape), which it
// regenerates as it reads, through buf. Its errors name the file.
func verifyFile(dir string, e Entry, dt tensor.Dtype, data any, buf []byte) error {
	fpath := filepath.Join(dir, e.File)
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w", fpath, fmt.Errorf(format, args...))
	}
	f, fi, err := openFile(dir, e.File)
	if errors.Is(err, fs.ErrNotExist) {
		return fail("variable file is missing")
	}
	if err != nil {
		return pathErr(fpath, err)
	}
	defer f.Close()
	if fi.Size() != e.Bytes {
		return fail("file has %d bytes, %d were written", fi.Size(), e.Bytes)
	}
	// The header as a reader parses it, from a reader of its own.
	hdr, err := readNPYHeader(bufio.NewReader(io.NewSectionReader(f, 0, fi.Size())))
	if err != nil {
		return fail("%w", err)
	}
	if hdr.Descr != e.Dtype || hdr.Fortran || !slices.Equal(hdr.Shape, e.Shape) {
		return fail("file holds dtype %s shape %v fortran_order %v, the manifest says dtype %s shape %v",
			hdr.Descr, hdr.Shape, hdr.Fortran, e.Dtype, e.Shape)
	}
	c := &sameBytes{r: f, buf: buf}
	if err := writeNPY(c, dt, e.Shape, data); err != nil {
		var d *differAt
		if errors.As(err, &d) {
			return fail("file is corrupted: its byte %d differs from what was written", d.off)
		}
		return fail("%w", err)
	}
	if c.off != e.Bytes {
		return fail("%d bytes compared, %d were written", c.off, e.Bytes)
	}
	return nil
}

// sameBytes is a writer that checks what it is written against what it
// reads from r, from the start, a len(buf) at a time.
type sameBytes struct {
	r   io.Reader
	buf []byte
	off int64 // bytes compared
}

// differAt is sameBytes' error of a byte that differs, at offset off.
type differAt struct{ off int64 }

func (d *differAt) Error() string { return fmt.Sprintf("byte %d differs", d.off) }

func (c *sameBytes) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n := min(len(p)-done, len(c.buf))
		if _, err := io.ReadFull(c.r, c.buf[:n]); err != nil {
			return done, err
		}
		if want := p[done : done+n]; !bytes.Equal(c.buf[:n], want) {
			k := 0
			for c.buf[k] == want[k] {
				k++
			}
			return done, &differAt{c.off + int64(k)}
		}
		done += n
		c.off += int64(n)
	}
	return done, nil
}
