package dataset

import (
	"io"
	"slices"
	"sync"
	"sync/atomic"
)

// recordCache keeps the records of the files a Pipeline with Cache has
// read to their end, by file, for its later epochs.
type recordCache struct {
	mu    sync.Mutex
	files map[string][]record
}

// get is file's records, when a read of it has reached its end.
func (c *recordCache) get(file string) ([]record, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	recs, ok := c.files[file]
	return recs, ok
}

// keepOnly forgets the records of the files not in files.
func (c *recordCache) keepOnly(files []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for f := range c.files {
		if !slices.Contains(files, f) {
			delete(c.files, f)
		}
	}
}

// put keeps file's records.
func (c *recordCache) put(file string, recs []record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files == nil {
		c.files = map[string][]record{}
	}
	c.files[file] = recs
}

// cachedFile reads a file's records from the cache.
type cachedFile struct {
	recs []record
	i    int // the record next read
}

func (s *cachedFile) next() (record, error) {
	if s.i == len(s.recs) {
		return record{}, io.EOF
	}
	s.i++
	return s.recs[s.i-1], nil
}

func (s *cachedFile) Close() error { return nil }

// rowSlot is a cached record's place for its RowParser row: the record's
// Example or raw bytes (data) until the row is prepared, then the row
// only. The row is stored before the data is dropped, so a reader that
// finds no data finds the row.
type rowSlot struct {
	row  atomic.Pointer[any]
	data atomic.Pointer[recordData]
}

// recordData is what a record holds to parse: a CSV row's Example or a
// TFRecord record's bytes.
type recordData struct {
	ex  Example
	raw []byte
}

// caching reads a file and, once the read reaches the file's end, puts
// every record it read into the cache; a read that stops early, or
// fails, keeps nothing.
type caching struct {
	fileSource
	file  string
	cache *recordCache
	recs  []record
	rows  bool // each record gets a slot for its prepared row, which holds its data
}

func (s *caching) next() (record, error) {
	r, err := s.fileSource.next()
	switch {
	case err == io.EOF:
		s.cache.put(s.file, s.recs)
		s.recs = nil
	case err == nil && s.rows:
		r.prep = new(rowSlot)
		r.prep.data.Store(&recordData{r.ex, r.raw})
		s.recs = append(s.recs, record{src: r.src, prep: r.prep})
	case err == nil:
		s.recs = append(s.recs, r)
	}
	return r, err
}
