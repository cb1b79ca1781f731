package dataset

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/towerflow/towerflow/sharding"
)

// Sharing is how the processes of a Pipeline (Processes > 1) share its
// records.
type Sharing int

const (
	// ShareAuto shares by file when there are at least as many files as
	// processes, by record otherwise.
	ShareAuto Sharing = iota
	// ShareRecords makes every process read every record and parse only
	// its rows of each batch: together the processes see exactly the
	// batches one process would, every record once an epoch, at the cost
	// of each process reading all the data.
	ShareRecords
	// ShareFiles gives each process its own files, which it alone reads;
	// it needs at least as many files as processes. See Pipeline.Sharing
	// for the rule.
	ShareFiles
)

func (s Sharing) String() string {
	switch s {
	case ShareAuto:
		return "auto"
	case ShareRecords:
		return "by record"
	case ShareFiles:
		return "by file"
	}
	return fmt.Sprintf("Sharing(%d)", int(s))
}

// PipelineCounts counts what a Pipeline did not train on: records
// skipped as damaged (RecordOptions.SkipDamaged) and records left out so
// that processes sharing by file take the same number of steps. A
// Pipeline given one (Pipeline.Counts) updates it as it reads; its
// methods are safe to call meanwhile.
type PipelineCounts struct {
	mu      sync.Mutex
	skipped map[string]int64
	dropped int64
}

// Skipped is, for each file in which damaged records were skipped, their
// number, as the latest reading of the file found it (every epoch reads
// a file again, unless the pipeline caches it, and finds the same
// damaged records).
func (c *PipelineCounts) Skipped() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.skipped)
}

// Dropped is the number of records left out so far, over every epoch
// read, because this process's share of the files holds more records
// than the steps every process takes use (ShareFiles).
func (c *PipelineCounts) Dropped() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}

// pipelineState is what the calls of one Pipeline's input function
// share: the files' record counts, once counted, and the damaged records
// already reported.
type pipelineState struct {
	planMu sync.Mutex
	plan   *sharePlan // sharing by file: this process's share, once counted

	skipMu  sync.Mutex
	skipped map[string]int64 // damaged records found in each file, as last reported

	cache recordCache // with Cache: the records of the files read to their end
}

// sharePlan is this process's share when the processes share by file.
type sharePlan struct {
	files    []string // this process's files, in the order given
	records  int64    // the records they hold
	batch    int      // this process's rows of each batch
	perEpoch int64    // the batches of an epoch, the same for every process
	dropped  int64    // this process's records an epoch leaves out
	shares   []int64  // the records of each process's share, by rank
}

// byFile says whether p's processes share by file.
func (p *Pipeline) byFile() bool {
	if p.Processes <= 1 {
		return false
	}
	switch p.Sharing {
	case ShareFiles:
		return true
	case ShareAuto:
		return len(p.Files) >= p.Processes
	}
	return false
}

// checkSharing checks p's Sharing against its files and processes.
func (p *Pipeline) checkSharing() error {
	switch {
	case p.Sharing < ShareAuto || p.Sharing > ShareFiles:
		return fmt.Errorf("dataset: pipeline: sharing %v does not exist", p.Sharing)
	case p.Sharing == ShareFiles && p.Processes > 1 && len(p.Files) < p.Processes:
		return fmt.Errorf("dataset: pipeline: sharing by file: %d files cannot give each of %d processes one", len(p.Files), p.Processes)
	}
	return nil
}

// sharePlan counts the records of every file, once for all the calls of
// the input function, and returns this process's share.
func (p *Pipeline) sharePlan(ctx context.Context) (*sharePlan, error) {
	p.state.planMu.Lock()
	defer p.state.planMu.Unlock()
	if p.state.plan != nil {
		return p.state.plan, nil
	}
	counts := make([]int64, len(p.Files))
	for i, file := range p.Files {
		n, err := p.countRecords(ctx, file)
		if err != nil {
			return nil, fmt.Errorf("dataset: pipeline: counting the records of each file to share them by file: %w", err)
		}
		counts[i] = n
	}
	plan := planShares(p.Files, counts, p.BatchSize, p.Processes, p.Rank, p.DropRemainder)
	if p.Logger != nil {
		p.Logger.Info("dataset: pipeline: processes share the files", "process", p.Rank, "processes", p.Processes,
			"files", len(plan.files), "records", plan.records, "share_records", plan.shares,
			"batches_per_epoch", plan.perEpoch, "dropped_per_epoch", plan.dropped)
	}
	p.state.plan = plan
	p.state.cache.keepOnly(plan.files) // counting read (and with Cache kept) every file
	return plan, nil
}

// countRecords reads file's records to count them, as an epoch reads
// them (damaged records skipped, if so configured, are not counted).
func (p *Pipeline) countRecords(ctx context.Context, file string) (int64, error) {
	s, err := p.open(file)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	var n int64
	for ; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if _, err := s.next(); err == io.EOF {
			p.noteSkipped(s)
			return n, nil
		} else if err != nil {
			return 0, err
		}
	}
}

// planShares deals the files, whose record counts are counts, to the
// processes: largest first, each to the process with the fewest records
// so far (the lowest rank of those tied), so that the shares are as even
// as whole files allow. Each process's batch is its sharding.Part of
// batchSize rows; an epoch is as many batches as the smallest share
// makes (whole ones, if drop), so that every process takes the same
// number of steps.
func planShares(files []string, counts []int64, batchSize, processes, rank int, drop bool) *sharePlan {
	order := make([]int, len(files))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(counts[b], counts[a]) })
	owner := make([]int, len(files))
	shares := make([]int64, processes)
	for _, f := range order {
		r := 0
		for q := range shares {
			if shares[q] < shares[r] {
				r = q
			}
		}
		owner[f] = r
		shares[r] += counts[f]
	}
	plan := &sharePlan{shares: shares, perEpoch: -1}
	for r := range processes {
		lo, hi, _ := sharding.Part(batchSize, processes, r) // batchSize >= processes: checked by Input
		b := int64(hi - lo)
		n := shares[r] / b
		if !drop && shares[r]%b != 0 {
			n++
		}
		if plan.perEpoch < 0 || n < plan.perEpoch {
			plan.perEpoch = n
		}
		if r == rank {
			plan.batch = hi - lo
		}
	}
	for f, file := range files {
		if owner[f] == rank {
			plan.files = append(plan.files, file)
			plan.records += counts[f]
		}
	}
	plan.dropped = plan.records - min(plan.records, plan.perEpoch*int64(plan.batch))
	return plan
}

// shareRNG is the generator of this process's draws in epoch, when the
// processes share by file: its files' order and its shuffle buffer's
// draws, another sequence for each process.
func (p *Pipeline) shareRNG(epoch int) *rand.Rand {
	return rand.New(rand.NewPCG(p.Seed^(uint64(p.Rank+1)*0x9e3779b97f4a7c15), 0x6461746173657400^uint64(epoch)))
}

// noteDropped counts the records an epoch of shared files leaves out.
func (p *Pipeline) noteDropped(n int64) {
	if n > 0 && p.Counts != nil {
		p.Counts.mu.Lock()
		p.Counts.dropped += n
		p.Counts.mu.Unlock()
	}
}

// noteSkipped reports the damaged records s skipped, if any and not
// reported already: through the logger, and in Counts.
func (p *Pipeline) noteSkipped(s fileSource) {
	if c, ok := s.(*caching); ok {
		s = c.fileSource
	}
	rf, ok := s.(recordFile)
	if !ok || rf.f.Skipped() == 0 {
		return
	}
	name, n := rf.f.Name(), int64(rf.f.Skipped())
	if p.Counts != nil {
		p.Counts.mu.Lock()
		if p.Counts.skipped == nil {
			p.Counts.skipped = map[string]int64{}
		}
		p.Counts.skipped[name] = n
		p.Counts.mu.Unlock()
	}
	if p.state == nil || p.Logger == nil {
		return
	}
	p.state.skipMu.Lock()
	known := p.state.skipped[name] == n
	if !known {
		if p.state.skipped == nil {
			p.state.skipped = map[string]int64{}
		}
		p.state.skipped[name] = n
	}
	p.state.skipMu.Unlock()
	if !known {
		p.Logger.Warn("dataset: pipeline: damaged records skipped", "file", name, "records", n)
	}
}
