package dataset

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/tfrecord"
	"github.com/towerflow/towerflow/internal/wanterr"
)

// readAll reads every record of r, and the error that ended it (nil at a
// clean end).
func readAll(r *RecordReader) ([]string, error) {
	var got []string
	for {
		data, err := r.Next()
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, string(data))
	}
}

// TestRecordWriterReader: records written plain, gzipped or zlibbed read
// back as written, by option and by file extension; Record and Offset
// count them.
func TestRecordWriterReader(t *testing.T) {
	want := []string{"first", "", strings.Repeat("long ", 100000), "last"}
	for _, c := range compressions {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r"+c.ext)
			w, err := CreateRecords(path, AutoCompression)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range want {
				if err := w.Write([]byte(s)); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := w.Write([]byte("after")); !errors.Is(err, fs.ErrClosed) {
				t.Errorf("writing after Close: %v, want an error wrapping fs.ErrClosed", err)
			}
			for _, opts := range []*RecordOptions{{Compression: c.c}, {Compression: AutoCompression}} {
				r, err := OpenRecords(path, opts)
				if err != nil {
					t.Fatal(err)
				}
				got, err := readAll(r.RecordReader)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("compression %q: records (-want +got):\n%s", opts.Compression, diff)
				}
				size := 0
				for _, s := range want {
					size += len(s) + tfrecord.Overhead
				}
				if r.Record() != int64(len(want)) || r.Offset() != int64(size) {
					t.Errorf("at the end: Record %d, Offset %d; want %d, %d", r.Record(), r.Offset(), len(want), size)
				}
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestCreateRecordsKeepsFiles: an existing file is never overwritten.
func TestCreateRecordsKeepsFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kept.tfrecord")
	if err := os.WriteFile(path, []byte("saved"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateRecords(path, NoCompression); !errors.Is(err, fs.ErrExist) {
		t.Errorf("CreateRecords over a file: %v, want an error wrapping fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "saved" {
		t.Errorf("the file holds %q, want %q", b, "saved")
	}
}

// TestRecordReaderDamage: a damaged record is an error naming the file,
// the record and its byte offset; with SkipDamaged, a record whose data
// checksum fails is skipped and counted and reading goes on, and a length
// that cannot be trusted ends the file, counted as one; a file cut short
// is an error either way.
func TestRecordReaderDamage(t *testing.T) {
	rec := func(s string) []byte { return tfrecord.AppendRecord(nil, []byte(s)) }
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	flip := func(b []byte, i int) []byte {
		b = bytes.Clone(b)
		b[(i+len(b))%len(b)] ^= 1
		return b
	}
	a, b, c := rec("aaaa"), rec("bb"), rec("c")
	tests := []struct {
		name    string
		file    []byte
		strict  []string
		errIs   error
		errHas  string // in the strict error
		skip    []string
		skipped int
		skipErr error
	}{
		{"whole", cat(a, b, c), []string{"aaaa", "bb", "c"}, nil, "", []string{"aaaa", "bb", "c"}, 0, nil},
		{"data", cat(a, flip(b, 13), c), []string{"aaaa"}, ErrCorrupt, "f.tfrecord: record 1 at byte 20: corrupt record: data checksum", []string{"aaaa", "c"}, 1, nil},
		{"data checksum", cat(flip(a, -1), b, flip(c, -2)), nil, ErrCorrupt, "record 0 at byte 0", []string{"bb"}, 2, nil},
		{"length checksum", cat(a, flip(b, 9), c), []string{"aaaa"}, ErrCorrupt, "record 1 at byte 20: corrupt record: length checksum", []string{"aaaa"}, 1, nil},
		{"length", cat(a, b, flip(c, 2)), []string{"aaaa", "bb"}, ErrCorrupt, "record 2 at byte 38", []string{"aaaa", "bb"}, 1, nil},
		{"cut short", cat(a, b[:len(b)-1]), []string{"aaaa"}, io.ErrUnexpectedEOF, "record 1 at byte 20", []string{"aaaa"}, 0, io.ErrUnexpectedEOF},
		{"damaged then cut short", cat(flip(a, -1), b[:5]), nil, ErrCorrupt, "record 0", nil, 1, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, skip := range []bool{false, true} {
				r, err := NewRecordReader(bytes.NewReader(tt.file), "f.tfrecord", &RecordOptions{SkipDamaged: skip})
				if err != nil {
					t.Fatal(err)
				}
				got, err := readAll(r)
				want, wantErr := tt.strict, tt.errIs
				if skip {
					want, wantErr = tt.skip, tt.skipErr
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("skip %v: records (-want +got):\n%s", skip, diff)
				}
				if !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
					t.Errorf("skip %v: error %v, want one wrapping %v", skip, err, wantErr)
				}
				if !skip && err != nil && !strings.Contains(err.Error(), tt.errHas) {
					t.Errorf("error %q does not say %q", err, tt.errHas)
				}
				if _, again := r.Next(); fmt.Sprint(again) != fmt.Sprint(errOrEOF(err)) {
					t.Errorf("skip %v: Next after the end: %v, want %v again", skip, again, errOrEOF(err))
				}
				wantSkipped := 0
				if skip {
					wantSkipped = tt.skipped
				}
				if r.Skipped() != wantSkipped {
					t.Errorf("skip %v: Skipped %d, want %d", skip, r.Skipped(), wantSkipped)
				}
			}
		})
	}
}

func errOrEOF(err error) error {
	if err == nil {
		return io.EOF
	}
	return err
}

// TestRecordReaderOptions: options that cannot be met, and compressed
// streams that are not, are errors naming the file.
func TestRecordReaderOptions(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(tfrecord.AppendRecord(nil, []byte("x")))
	zw.Close()
	var zz bytes.Buffer
	zlw := zlib.NewWriter(&zz)
	zlw.Write(tfrecord.AppendRecord(nil, []byte("x")))
	zlw.Close()
	big := tfrecord.AppendRecord(nil, make([]byte, 100))
	tests := []struct {
		name   string
		file   []byte
		opts   RecordOptions
		want   string
		absent string // what the error must not say
	}{
		{"unknown compression", nil, RecordOptions{Compression: "LZ4"}, `f: compression "LZ4"`, ""},
		{"negative bound", nil, RecordOptions{MaxRecordBytes: -1}, "f: MaxRecordBytes -1", ""},
		{"not gzip", []byte("plain"), RecordOptions{Compression: GZIP}, "f: gzip: ", ""},
		{"not zlib", []byte("plain"), RecordOptions{Compression: ZLIB}, "f: zlib: ", ""},
		{"gzip cut short", gz.Bytes()[:gz.Len()-5], RecordOptions{Compression: GZIP}, "f: record 1 at byte 17: record header: unexpected EOF", ""},
		{"record past the bound", big, RecordOptions{MaxRecordBytes: 99}, "f: record 0 at byte 0: corrupt record: length 100, more than the 99", "starts as"},
		{"gzip read as plain", gz.Bytes(), RecordOptions{}, "f: record 0 at byte 0: corrupt record: length checksum", ""},
		{"gzip read as plain, the hint", gz.Bytes(), RecordOptions{}, "(the file starts as a gzip stream does: read it with Compression GZIP, or AutoCompression", ""},
		{"zlib read as plain", zz.Bytes(), RecordOptions{}, "(the file starts as a zlib stream does: read it with Compression ZLIB", ""},
		{"a damaged plain file", []byte("plain text, not records"), RecordOptions{}, "f: record 0 at byte 0: corrupt record", "starts as"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRecordReader(bytes.NewReader(tt.file), "f", &tt.opts)
			if err == nil {
				_, err = readAll(r)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
			if tt.absent != "" && err != nil && strings.Contains(err.Error(), tt.absent) {
				t.Errorf("error %v says %q", err, tt.absent)
			}
		})
	}
}

// failingReader fails its first read, then ends.
type failingReader struct{ failed bool }

func (f *failingReader) Read([]byte) (int, error) {
	if !f.failed {
		f.failed = true
		return 0, errors.New("disk on fire")
	}
	return 0, io.EOF
}

// TestRecordReaderReadError: a read error before the first record is the
// error of record 0, not an empty file.
func TestRecordReaderReadError(t *testing.T) {
	r, err := NewRecordReader(&failingReader{}, "f", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = readAll(r)
	wanterr.Mentions(t, err, "f: record 0 at byte 0", "disk on fire")
}
