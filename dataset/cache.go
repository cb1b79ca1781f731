package dataset

import (
	"io"
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

// preparedRow is a cached record's row, once a RowParser has prepared
// it.
type preparedRow struct{ row atomic.Pointer[any] }

// caching reads a file and, once the read reaches the file's end, puts
// every record it read into the cache; a read that stops early, or
// fails, keeps nothing.
type caching struct {
	fileSource
	file  string
	cache *recordCache
	recs  []record
	rows  bool // each record gets a place for its prepared row
}

func (s *caching) next() (record, error) {
	r, err := s.fileSource.next()
	switch {
	case err == io.EOF:
		s.cache.put(s.file, s.recs)
		s.recs = nil
	case err == nil:
		if s.rows {
			r.prep = new(preparedRow)
		}
		s.recs = append(s.recs, r)
	}
	return r, err
}
