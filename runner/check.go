package runner

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// Check collects what is wrong with a program's flags, before it starts:
// each method checks one flag (or a size some flags make) and records an
// error naming the flag, its value and what it may be. Err returns them;
// Usage prints them and exits with status 2, as the flag package does for
// a flag it cannot parse.
type Check struct {
	errs []error
}

// NoLimit as Int's hi leaves the value unbounded above.
const NoLimit = math.MaxInt64

// Int checks that flag name's value v lies in lo..hi (hi NoLimit: at
// least lo).
func (c *Check) Int(name string, v, lo, hi int64) {
	if v >= lo && v <= hi {
		return
	}
	if hi == NoLimit {
		c.errs = append(c.errs, fmt.Errorf("-%s %d: want at least %d", name, v, lo))
		return
	}
	c.errs = append(c.errs, fmt.Errorf("-%s %d: want %d to %d", name, v, lo, hi))
}

// Float checks that flag name's value v is a finite number in lo..hi
// (hi +Inf: at least lo).
func (c *Check) Float(name string, v, lo, hi float64) {
	if v >= lo && v <= hi && !math.IsInf(v, 0) {
		return
	}
	if math.IsInf(hi, 1) {
		c.errs = append(c.errs, fmt.Errorf("-%s %v: want a finite number, at least %v", name, v, lo))
		return
	}
	c.errs = append(c.errs, fmt.Errorf("-%s %v: want a number from %v to %v", name, v, lo, hi))
}

// OneOf checks that flag name's value v is one of allowed.
func (c *Check) OneOf(name, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	c.errs = append(c.errs, fmt.Errorf("-%s %q: want %s", name, v, strings.Join(allowed, " or ")))
}

// Add records err, when not nil: a check of the program's own.
func (c *Check) Add(err error) {
	if err != nil {
		c.errs = append(c.errs, err)
	}
}

// Memory checks that bytes, the memory that flags (e.g. "-hidden
// 100000000") make the run need for what (e.g. "the weights and optimizer
// slots"), fit in the memory this machine has available
// (AvailableMemory); it checks nothing where that is unknown.
func (c *Check) Memory(flags, what string, bytes float64) {
	avail, ok := AvailableMemory()
	if !ok || bytes <= float64(avail) {
		return
	}
	c.errs = append(c.errs, fmt.Errorf("%s needs about %s for %s; this machine has %s available", flags, gigabytes(bytes), what, gigabytes(float64(avail))))
}

// Err returns the errors recorded, joined (one a line), or nil.
func (c *Check) Err() error { return errors.Join(c.errs...) }

// ModelBytes is the memory of a model's weights and optimizer state:
// params parameters of size bytes each, and slots more values per
// parameter kept by the optimizer (1 for momentum, 2 for Adam).
func ModelBytes(params float64, bytes, slots int) float64 {
	return params * float64(bytes) * float64(1+slots)
}

// gigabytes formats n bytes in GB (10⁹ bytes).
func gigabytes(n float64) string {
	g := n / 1e9
	if g < 10 {
		return strconv.FormatFloat(g, 'f', 1, 64) + " GB"
	}
	return strconv.FormatFloat(g, 'f', 0, 64) + " GB"
}

// AvailableMemory returns the memory, in bytes, that this machine has
// available for a new process, and whether it knows: MemAvailable of
// /proc/meminfo (Linux); elsewhere, or where that cannot be read, it does
// not know. Tests replace it.
var AvailableMemory = func() (int64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	return memAvailable(b)
}

// memAvailable returns the MemAvailable line of a /proc/meminfo, in bytes.
func memAvailable(meminfo []byte) (int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 || kb > math.MaxInt64/1024 {
			return 0, false
		}
		return kb * 1024, true
	}
	return 0, false
}

// Usage exits the process with status 2, as the flag package does for a
// flag it cannot parse, when err (a Check's Err) is not nil: each line of
// its message printed after name on standard error.
func Usage(name string, err error) {
	if err == nil {
		return
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(os.Stderr, "%s: %s\n", name, line)
	}
	os.Exit(2)
}
