package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/tfrecord"
	"github.com/towerflow/towerflow/sharding"
)

// Pipeline reads Examples from files into the batches an Estimator trains
// on, as tf.data's interleave, shuffle, batch, repeat, parse_example and
// prefetch: Input makes it an estimator.InputFn.
//
// An epoch reads every record of Files once: CycleLength files at a time,
// one record of each in turn (a file that ends gives its place to the
// next file), through a shuffle buffer of ShuffleBuffer records (each
// record out is drawn uniformly from the buffer and replaced by the next
// record read), cut into batches of BatchSize. With shuffling, the order
// of the files and the draws are new every epoch, from Seed and the
// epoch's number. Workers goroutines turn batches of Examples into
// tensors (Parser, or ParseExamples with Spec) up to Prefetch batches
// ahead of the towers; the batches are the same whatever the number of
// workers. Memory is bounded
// by ShuffleBuffer, CycleLength open files and Prefetch+Workers batches,
// never by the size of a file. Files that make no batch at all (no
// records, too few for a batch DropRemainder keeps, or a process's share
// of them too small) are an error wrapping estimator.ErrNoBatches and
// naming them, in the place of the first batch: Train and Evaluate
// return it, Predict yields no predictions.
type Pipeline struct {
	// Files are paths or filepath.Match patterns (each pattern's matches
	// in lexical order). Required.
	Files []string
	// CSV, when not nil, says the files are CSV files and how to read
	// them (see CSVReader; ReuseExample is ignored). Otherwise they are
	// TFRecord files of tf.Examples, read as Records says.
	CSV     *CSVOptions
	Records RecordOptions
	// Spec says how features become tensors (ParseExamples): the
	// pipeline parses with SpecParser(Spec). Required unless Parser is
	// set; giving both is an error.
	Spec map[string]FeatureSpec
	// Parser, when set, turns each batch of Examples into tensors instead
	// of Spec (a feature transformation, such as feature columns). The
	// workers run it at once on different batches; with Processes, each
	// process parses only its rows of each batch. An error it returns is
	// named by the batch and the records it came from: a *ParseError by
	// its example's file and record, another error by the files and
	// records of the whole batch.
	Parser Parser
	// BatchSize is the number of records a batch; the last batch of an
	// epoch may be smaller, unless DropRemainder drops it. Required.
	BatchSize     int
	DropRemainder bool
	// Epochs is how many passes over the files to make: 0 means 1,
	// estimator.Forever repeats without end.
	Epochs int
	// ShuffleBuffer is the shuffle buffer's size in records; 0 or 1 does
	// not shuffle (the files are then read in order, too). Seed seeds it.
	ShuffleBuffer int
	Seed          uint64
	// CycleLength is how many files are read at once, interleaved record
	// by record; 0 means 1.
	CycleLength int
	// Cache keeps in memory the records of every file read to its end
	// (tf.data's cache): later reads of the file, in later epochs or
	// later calls of the input function, take its records from memory
	// instead of reading it again. The batches are the same with or
	// without. A file changed since it was cached is not read again. The
	// Parser must not modify the Examples it is given. With a RowParser
	// (such as a feature-column transformation), a record's prepared row
	// takes its place once made, so that later epochs neither decode nor
	// transform it and only put batches together; otherwise the records
	// are kept as read (CSV rows as Examples, several times the file's
	// size; TFRecord records as their bytes, decoded every epoch). With
	// processes sharing by file, each keeps only its own files.
	Cache bool
	// Workers is how many goroutines parse batches; 0 means 1. Prefetch
	// is how many batches may wait, parsed or being parsed, ahead of the
	// consumer; 0 means 2.
	Workers, Prefetch int
	// Processes, when more than 1, makes this the input of process Rank
	// of that many training together, as estimator.TensorInput does:
	// BatchSize is the batch of all of them, and each process's batch its
	// part, the rows sharding.Part(BatchSize, Processes, Rank) gives.
	// Sharing says how they share the records:
	//
	// By record (ShareRecords, or ShareAuto with fewer files than
	// processes), every process reads the records of every file, in the
	// same order, so that they cut the same batches, and parses only its
	// part of each: together they see exactly the batches one process
	// would, every record once an epoch.
	//
	// By file (ShareFiles, or ShareAuto with at least as many files as
	// processes), each process reads only its own files. Every process
	// first counts the records of every file (a read of all of them, once
	// per input function) and deals the files the same way: largest
	// first, each to the process with the fewest records so far. A
	// process reads its files as one process reads all of them —
	// interleaved, shuffled with a buffer and cut into batches of its
	// part — but with its own draws (from Seed, the epoch and Rank). The
	// batch of a step is the processes' batches together, in rank order.
	// An epoch is as many batches as the smallest share makes (whole
	// ones, with DropRemainder), the same number for every process, so
	// that no process waits at a step the others never take; the records
	// of a larger share past them are not read that epoch. That number,
	// the shares and the records each epoch leaves out are logged to
	// Logger, and Counts counts them. With shares of equal records (and
	// a multiple of the batch part, with DropRemainder), every record is
	// read once an epoch.
	Processes, Rank int
	Sharing         Sharing
	// Logger, when not nil, receives what the pipeline leaves out: the
	// damaged records it skips (RecordOptions.SkipDamaged), per file, and
	// how processes share the files.
	Logger *slog.Logger
	// Counts, when not nil, counts the same, for the caller to read while
	// or after the pipeline reads.
	Counts *PipelineCounts

	state *pipelineState // shared by the calls of Input's function
}

// origin is where a record came from, for errors.
type origin struct {
	file   string
	n      int64 // record number (from 0) or line (from 1)
	offset int64 // a TFRecord record's byte offset; -1 for a CSV row
}

func (o origin) String() string {
	if o.offset < 0 {
		return fmt.Sprintf("%s:%d", o.file, o.n)
	}
	return fmt.Sprintf("%s: record %d at byte %d", o.file, o.n, o.offset)
}

// record is a record read, and where it came from: a CSV row's Example,
// or a TFRecord record's bytes, which a parse worker decodes.
type record struct {
	ex   Example
	raw  []byte
	src  origin
	prep *rowSlot // a cached record's slot for its RowParser row
}

// fileSource reads the records of one file.
type fileSource interface {
	next() (record, error)
	Close() error
}

type csvFile struct{ r *CSVReader }

func (s csvFile) next() (record, error) {
	ex, err := s.r.Next()
	if err != nil {
		return record{}, err
	}
	return record{ex: ex, src: origin{s.r.files[0], int64(s.r.lastLine()), -1}}, nil
}

func (s csvFile) Close() error { return s.r.Close() }

type recordFile struct{ f *RecordFile }

func (s recordFile) next() (record, error) {
	data, err := s.f.Next()
	if err != nil {
		return record{}, err
	}
	src := origin{s.f.Name(), s.f.Record() - 1, s.f.Offset() - int64(len(data)) - tfrecord.Overhead}
	return record{raw: append([]byte(nil), data...), src: src}, nil
}

func (s recordFile) Close() error { return s.f.Close() }

// Examples makes r a Source of the Examples its records hold
// (NextExample).
func (r *RecordReader) Examples() Source { return recordExamples{r} }

type recordExamples struct{ r *RecordReader }

func (s recordExamples) Next() (Example, error) { return s.r.NextExample() }

// Input checks p and makes it an input function. Called by
// Estimator.Train, the function resumes where the steps already trained
// stopped: it skips estimator.StartBatch(ctx) batches, reading their
// records (the shuffle needs them) but not parsing them, and whole epochs
// past the first without reading them; so a run stopped and resumed from
// its checkpoint reads exactly the batches an uninterrupted run reads,
// provided every step so far was trained on this pipeline (same files,
// options and seed) from its start.
func (p Pipeline) Input() (estimator.InputFn, error) {
	files, err := expandFiles(p.Files)
	if err != nil {
		return nil, fmt.Errorf("dataset: pipeline: %w", err)
	}
	switch {
	case p.Parser != nil && len(p.Spec) > 0:
		return nil, errors.New("dataset: pipeline: both a Spec and a Parser: give one")
	case p.Parser == nil && len(p.Spec) == 0:
		return nil, errors.New("dataset: pipeline: no feature spec")
	case p.BatchSize < 1:
		return nil, fmt.Errorf("dataset: pipeline: batch size %d, want at least 1", p.BatchSize)
	case p.Epochs < estimator.Forever:
		return nil, fmt.Errorf("dataset: pipeline: epochs %d, want 0 or more, or Forever", p.Epochs)
	case p.ShuffleBuffer < 0 || p.CycleLength < 0 || p.Workers < 0 || p.Prefetch < 0:
		return nil, fmt.Errorf("dataset: pipeline: shuffle buffer %d, cycle length %d, workers %d, prefetch %d: want 0 or more", p.ShuffleBuffer, p.CycleLength, p.Workers, p.Prefetch)
	case p.Processes > 1 && (p.Rank < 0 || p.Rank >= p.Processes):
		return nil, fmt.Errorf("dataset: pipeline: rank %d of %d processes does not exist", p.Rank, p.Processes)
	case p.Processes > 1 && p.BatchSize < p.Processes:
		return nil, fmt.Errorf("dataset: pipeline: a batch of %d records cannot give each of %d processes one", p.BatchSize, p.Processes)
	}
	p.Files = files
	if err := p.checkSharing(); err != nil {
		return nil, err
	}
	if p.Parser == nil {
		spec := SpecParser(p.Spec)
		if err := spec.Check(); err != nil {
			return nil, fmt.Errorf("dataset: pipeline: %w", err)
		}
		p.Parser = spec
	}
	if p.CSV != nil {
		opts := *p.CSV
		opts.ReuseExample = false                                          // the shuffle buffer holds Examples
		if _, err := newCSVReader(files[:1], opts, openFile); err != nil { // opens nothing yet
			return nil, fmt.Errorf("dataset: pipeline: %w", err)
		}
		if rs, ok := p.Parser.(RawSpecer); ok {
			if err := checkCSVFeatures(rs.RawSpec(), opts); err != nil {
				return nil, fmt.Errorf("dataset: pipeline: %w", err)
			}
		}
		p.CSV = &opts
	}
	p.state = &pipelineState{}
	return func(ctx context.Context) iter.Seq2[sharding.Batch, error] {
		return p.batches(ctx, estimator.StartBatch(ctx))
	}, nil
}

// checkCSVFeatures is the error of the features spec reads that no column
// of CSV files read as opts says has: a misspelled name, which would
// otherwise be a feature every record lacks. Labels (files to predict on
// have none) and features with a default may be absent.
func checkCSVFeatures(spec map[string]FeatureSpec, opts CSVOptions) error {
	read := opts.Columns
	if read == nil {
		for _, c := range opts.Schema {
			read = append(read, c.Name)
		}
	}
	var missing []string
	for name, fs := range spec {
		if !fs.Label && fs.Default.Len() == 0 && !slices.Contains(read, name) {
			missing = append(missing, strconv.Quote(name))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	what := "feature " + missing[0] + ", which the CSV columns read do not include"
	if len(missing) > 1 {
		what = "features " + strings.Join(missing, ", ") + ", which the CSV columns read do not include"
	}
	return fmt.Errorf("the parser reads %s (they are: %s)", what, strings.Join(read, ", "))
}

// open opens one file: with Cache, its records in memory once a read
// has reached its end.
func (p *Pipeline) open(file string) (fileSource, error) {
	if !p.Cache {
		return p.openSource(file)
	}
	if recs, ok := p.state.cache.get(file); ok {
		return &cachedFile{recs: recs}, nil
	}
	s, err := p.openSource(file)
	if err != nil {
		return nil, err
	}
	_, rows := p.Parser.(RowParser)
	return &caching{fileSource: s, file: file, cache: &p.state.cache, rows: rows}, nil
}

// openSource opens one file to read it.
func (p *Pipeline) openSource(file string) (fileSource, error) {
	if p.CSV != nil {
		r, err := newCSVReader([]string{file}, *p.CSV, openFile)
		if err != nil {
			return nil, err
		}
		return csvFile{r}, nil
	}
	f, err := OpenRecords(file, &p.Records)
	if err != nil {
		return nil, err
	}
	return recordFile{f}, nil
}

// epochRNG is epoch's generator: the files' order and the shuffle's draws.
func (p *Pipeline) epochRNG(epoch int) *rand.Rand {
	return rand.New(rand.NewPCG(p.Seed, 0x6461746173657400^uint64(epoch)))
}

// records is epoch's records, interleaved and shuffled, in order.
func (p *Pipeline) records(epoch int) iter.Seq2[record, error] {
	return p.shuffled(p.Files, p.epochRNG(epoch))
}

// shuffled is the records of files, interleaved and shuffled with rng's
// draws, in order.
func (p *Pipeline) shuffled(files []string, rng *rand.Rand) iter.Seq2[record, error] {
	shuffle := p.ShuffleBuffer > 1
	if shuffle {
		files = slices.Clone(files)
		rng.Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
	}
	in := p.interleave(files)
	if !shuffle {
		return in
	}
	return func(yield func(record, error) bool) {
		buf := make([]record, 0, p.ShuffleBuffer)
		for r, err := range in {
			if err != nil {
				yield(record{}, err)
				return
			}
			if len(buf) < p.ShuffleBuffer {
				buf = append(buf, r)
				continue
			}
			i := rng.IntN(len(buf))
			out := buf[i]
			buf[i] = r
			if !yield(out, nil) {
				return
			}
		}
		for len(buf) > 0 {
			i := rng.IntN(len(buf))
			out := buf[i]
			buf[i] = buf[len(buf)-1]
			buf = buf[:len(buf)-1]
			if !yield(out, nil) {
				return
			}
		}
	}
}

// interleave reads files CycleLength at a time, one record of each in
// turn; a file that ends is replaced, in its place in the cycle, by the
// next file.
func (p *Pipeline) interleave(files []string) iter.Seq2[record, error] {
	return func(yield func(record, error) bool) {
		var open []fileSource
		defer func() {
			for _, s := range open {
				s.Close()
			}
		}()
		next := 0
		for next < len(files) && len(open) < max(p.CycleLength, 1) {
			s, err := p.open(files[next])
			if err != nil {
				yield(record{}, err)
				return
			}
			open = append(open, s)
			next++
		}
		for cur := 0; len(open) > 0; {
			s := open[cur]
			r, err := s.next()
			if err == io.EOF {
				p.noteSkipped(s)
				err = s.Close()
				open = slices.Delete(open, cur, cur+1)
				if err != nil {
					yield(record{}, err)
					return
				}
				if next < len(files) {
					s, err := p.open(files[next])
					if err != nil {
						yield(record{}, err)
						return
					}
					open = slices.Insert(open, cur, s)
					next++
				} else if cur == len(open) {
					cur = 0
				}
				continue
			}
			if err != nil {
				yield(record{}, err)
				return
			}
			if !yield(r, nil) {
				return
			}
			cur = (cur + 1) % len(open)
		}
	}
}

// job is one batch for a worker to parse; its result goes to out.
type job struct {
	n    int64 // the batch's number, from the first epoch's first
	recs []record
	out  chan result
}

type result struct {
	b   sharding.Batch
	err error
}

// cut reads the batches from batch start on, and sends this process's
// part of each to jobs (and its result channel to order, in order),
// until the last epoch ends or ctx is done.
func (p *Pipeline) cut(ctx context.Context, start int64, jobs chan<- job, order chan<- chan result) {
	send := func(j job) bool {
		select {
		case order <- j.out:
		case <-ctx.Done():
			return false
		}
		if j.recs == nil {
			return true // the result is in j.out already
		}
		select {
		case jobs <- j:
			return true
		case <-ctx.Done():
			return false
		}
	}
	fail := func(err error) {
		out := make(chan result, 1)
		out <- result{err: err}
		send(job{out: out})
	}
	epochs := p.Epochs
	if epochs == 0 {
		epochs = 1
	}
	var n int64           // the batch next cut
	perEpoch := int64(-1) // batches an epoch, once known
	size, records := p.BatchSize, p.records
	var plan *sharePlan // this process's files, when sharing by file
	if p.byFile() {
		var err error
		if plan, err = p.sharePlan(ctx); err != nil {
			fail(err)
			return
		}
		if perEpoch = plan.perEpoch; perEpoch == 0 {
			fail(p.noShareBatch(plan))
			return
		}
		size = plan.batch
		records = func(e int) iter.Seq2[record, error] { return p.shuffled(plan.files, p.shareRNG(e)) }
	}
	for e := 0; epochs == estimator.Forever || e < epochs; e++ {
		if perEpoch > 0 && start-n >= perEpoch {
			skip := (start - n) / perEpoch
			if epochs != estimator.Forever {
				skip = min(skip, int64(epochs-e))
			}
			e += int(skip) - 1
			n += skip * perEpoch
			continue
		}
		first, read := n, 0
		batch := make([]record, 0, size)
		flush := func() bool {
			defer func() { batch = make([]record, 0, size) }()
			n++
			if n-1 < start {
				return true
			}
			part := batch
			if p.Processes > 1 && plan == nil {
				lo, hi, err := sharding.Part(len(batch), p.Processes, p.Rank)
				if err != nil {
					fail(fmt.Errorf("dataset: pipeline: batch %d (epoch %d) for process %d of %d: %w", n-1, e, p.Rank, p.Processes, err))
					return false
				}
				part = batch[lo:hi]
			}
			return send(job{n: n - 1, recs: part, out: make(chan result, 1)})
		}
		for r, err := range records(e) {
			if err != nil {
				fail(fmt.Errorf("dataset: pipeline: epoch %d: %w", e, err))
				return
			}
			read++
			if batch = append(batch, r); len(batch) == size && !flush() {
				return
			}
			if plan != nil && n-first == plan.perEpoch {
				break // the rest of a larger share is left out
			}
			if ctx.Err() != nil {
				return
			}
		}
		if len(batch) > 0 && !p.DropRemainder && (plan == nil || n-first < plan.perEpoch) && !flush() {
			return
		}
		if plan != nil {
			if n-first != plan.perEpoch {
				fail(fmt.Errorf("dataset: pipeline: epoch %d: process %d's %d files made %d batches, not the %d their records counted before make: a file changed since", e, p.Rank, len(plan.files), n-first, plan.perEpoch))
				return
			}
			p.noteDropped(plan.dropped)
		}
		perEpoch = n - first
		if perEpoch == 0 { // no epoch has a batch
			skipped := ""
			if p.Records.SkipDamaged {
				skipped = " (not counting damaged records skipped: RecordOptions.SkipDamaged)"
			}
			if read == 0 {
				fail(fmt.Errorf("dataset: pipeline: %w: the files hold no records%s: %s", estimator.ErrNoBatches, skipped, fileList(p.Files)))
			} else {
				fail(fmt.Errorf("dataset: pipeline: %w: the files' %d records%s are fewer than a batch of %d, and DropRemainder drops them: %s", estimator.ErrNoBatches, read, skipped, size, fileList(p.Files)))
			}
			return
		}
	}
}

// parse is a worker: it parses the batches of jobs.
func (p *Pipeline) parse(jobs <-chan job) {
	var dec exampleDecoder
	for j := range jobs {
		j.out <- p.parseBatch(&dec, j)
	}
}

// parseBatch decodes j's records, if TFRecord ones, and parses them.
func (p *Pipeline) parseBatch(dec *exampleDecoder, j job) result {
	var decodeErr error // a record that is no tf.Example
	example := func(i int, d recordData) (Example, error) {
		if d.raw == nil {
			return d.ex, nil
		}
		ex, err := dec.decode(d.raw)
		if err != nil {
			decodeErr = fmt.Errorf("dataset: pipeline: batch %d: %s: %w", j.n, j.recs[i].src, err)
			return nil, decodeErr
		}
		return ex, nil
	}
	var b sharding.Batch
	var err error
	if rp, ok := p.Parser.(RowParser); ok && p.Cache {
		b, err = p.parseRows(rp, j.recs, example)
	} else {
		examples := make([]Example, len(j.recs))
		for i, r := range j.recs {
			if examples[i], err = example(i, recordData{r.ex, r.raw}); err != nil {
				return result{err: err}
			}
		}
		b, err = ParseGuarded(p.Parser, examples)
	}
	if decodeErr != nil {
		return result{err: decodeErr}
	}
	if err != nil {
		var pe *ParseError
		var re *recordError
		switch {
		case errors.As(err, &pe) && pe.Example >= 0 && pe.Example < len(j.recs):
			err = fmt.Errorf("dataset: pipeline: batch %d: %s: feature %q: %w", j.n, j.recs[pe.Example].src, pe.Feature, pe.Err)
		case errors.As(err, &re) && re.record >= 0 && re.record < len(j.recs):
			err = fmt.Errorf("dataset: pipeline: batch %d: %s: %w", j.n, j.recs[re.record].src, re.err)
		default:
			err = fmt.Errorf("dataset: pipeline: batch %d (%s): %w", j.n, describeRecords(j.recs), err)
		}
	}
	return result{b, err}
}

// parseRows parses the records recs with rp, example(i, data) being
// record i's Example: a cached record's row is prepared once (twice at
// most, when one record is in two batches being parsed at once), kept in
// its slot in place of its data.
func (p *Pipeline) parseRows(rp RowParser, recs []record, example func(int, recordData) (Example, error)) (sharding.Batch, error) {
	rows := make([]any, len(recs))
	data := make([]recordData, len(recs))
	for i, r := range recs {
		data[i] = recordData{r.ex, r.raw}
		if r.prep == nil {
			continue
		}
		if row := r.prep.row.Load(); row != nil {
			rows[i] = *row
		} else if d := r.prep.data.Load(); d != nil {
			data[i] = *d
		} else if row := r.prep.row.Load(); row != nil { // prepared since: the data goes after the row is in
			rows[i] = *row
		}
	}
	b, err := parseRowsGuarded(rp, rows, func(i int) (Example, error) { return example(i, data[i]) })
	if err != nil {
		return b, err
	}
	for i, r := range recs {
		if r.prep != nil && r.prep.row.Load() == nil {
			row := rows[i]
			if r.prep.row.CompareAndSwap(nil, &row) {
				r.prep.data.Store(nil)
			}
		}
	}
	return b, nil
}

// batches is the pipeline's batches from batch start on.
func (p *Pipeline) batches(ctx context.Context, start int64) iter.Seq2[sharding.Batch, error] {
	return func(yield func(sharding.Batch, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		workers := max(p.Workers, 1)
		ahead := p.Prefetch
		if ahead == 0 {
			ahead = 2
		}
		jobs := make(chan job)
		order := make(chan chan result, ahead)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(order)
			defer close(jobs)
			p.cut(ctx, start, jobs, order)
		}()
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.parse(jobs)
			}()
		}
		defer func() {
			cancel()
			for range order { // let the reader finish its send and exit
			}
			wg.Wait()
		}()
		for out := range order {
			var r result
			select {
			case r = <-out:
			case <-ctx.Done():
				yield(sharding.Batch{}, ctx.Err())
				return
			}
			if !yield(r.b, r.err) || r.err != nil {
				return
			}
		}
		if err := ctx.Err(); err != nil {
			yield(sharding.Batch{}, err)
		}
	}
}

// noShareBatch is the error of processes sharing the files by file whose
// smallest share makes no batch: it names that process, its share and
// its part of a batch.
func (p *Pipeline) noShareBatch(plan *sharePlan) error {
	rank := slices.Index(plan.shares, slices.Min(plan.shares))
	lo, hi, err := sharding.Part(p.BatchSize, p.Processes, rank)
	if err != nil {
		return fmt.Errorf("dataset: pipeline: process %d's part of a batch: %w", rank, err)
	}
	why := fmt.Sprintf("process %d's share of the files holds no records", rank)
	if plan.shares[rank] > 0 {
		why = fmt.Sprintf("process %d's share of the files holds %d records, fewer than its %d rows of a batch, and DropRemainder drops them", rank, plan.shares[rank], hi-lo)
	}
	return fmt.Errorf("dataset: pipeline: %w: shared by file among %d processes, %s (Sharing: ShareRecords has every process read every file)", estimator.ErrNoBatches, p.Processes, why)
}

// fileList names files, the first few of many.
func fileList(files []string) string {
	const most = 4
	if len(files) <= most {
		return strings.Join(files, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(files[:most], ", "), len(files)-most)
}

// maxRanges bounds the runs of records describeRecords lists.
const maxRanges = 8

// describeRecords names the records of a batch: per file, in the order
// they first appear, runs of consecutive record numbers (lines for CSV
// files), at most maxRanges runs.
func describeRecords(recs []record) string {
	type run struct{ lo, hi int64 }
	var files []string
	runs := map[string][]run{}
	for _, r := range recs {
		rs, seen := runs[r.src.file]
		if !seen {
			files = append(files, r.src.file)
		}
		if n := len(rs); n > 0 && rs[n-1].hi+1 == r.src.n {
			rs[n-1].hi = r.src.n
		} else {
			rs = append(rs, run{r.src.n, r.src.n})
		}
		runs[r.src.file] = rs
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d records: ", len(recs))
	listed, total := 0, 0
	for _, rs := range runs {
		total += len(rs)
	}
	for i, file := range files {
		if listed == maxRanges {
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		what := "records"
		if recs[0].src.offset < 0 {
			what = "lines"
		}
		fmt.Fprintf(&b, "%s %s ", file, what)
		for k, r := range runs[file] {
			if listed == maxRanges {
				break
			}
			if k > 0 {
				b.WriteString(",")
			}
			if r.lo == r.hi {
				fmt.Fprintf(&b, "%d", r.lo)
			} else {
				fmt.Fprintf(&b, "%d-%d", r.lo, r.hi)
			}
			listed++
		}
	}
	if listed < total {
		fmt.Fprintf(&b, " and %d more runs", total-listed)
	}
	return b.String()
}
