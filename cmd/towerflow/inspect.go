package main

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/internal/numeric"
)

const inspectSynopsis = "[-values] [-n count] <checkpoint dir or model dir>"

// inspect is the inspect command: it prints a checkpoint's path, step,
// format and variables, and warns on stderr of what reading a model
// directory passed over (a damaged newer checkpoint, a lost pointer file).
func inspect(stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	values := fs.Bool("values", false, "print the first values of each variable")
	count := fs.Int("n", 6, "how many values -values prints per variable")
	pos, err := parseFlags(fs, inspectSynopsis, stdout, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("inspect wants one checkpoint or model directory, got %d arguments", len(pos))
	}
	if *count < 1 {
		return usagef("-n %d: want at least 1", *count)
	}
	r, err := checkpoint.Read(pos[0])
	if err != nil {
		return err // names the directory or file
	}
	for _, note := range r.Skipped() {
		fmt.Fprintf(stderr, "towerflow inspect: warning: %s\n", note)
	}
	m := r.Manifest()

	fmt.Fprintf(stdout, "checkpoint: %s\n", r.Path())
	fmt.Fprintf(stdout, "step:       %d\n", r.Step())
	fmt.Fprintf(stdout, "format:     %s\n", m.Format)
	if !m.Created.IsZero() {
		fmt.Fprintf(stdout, "created:    %s\n", m.Created.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(stdout)

	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "NAME\tDTYPE\tNPY\tSHAPE\tTRAINABLE\tELEMENTS\tBYTES\tFILE BYTES\n")
	var elems, bytes, fileBytes, trainable int64
	for _, e := range m.Variables {
		n := int64(1)
		for _, d := range e.Shape {
			n *= int64(d)
		}
		b := n * itemSize(e.Dtype)
		elems, bytes, fileBytes = elems+n, bytes+b, fileBytes+e.Bytes
		if e.Trainable {
			trainable++
		}
		dt := e.GoDtype
		if dt == "" {
			dt = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\t%d\t%d\t%d\n",
			e.Name, dt, e.Dtype, shapeString(e.Shape), e.Trainable, n, b, e.Bytes)
	}
	fmt.Fprintf(tw, "total (%d variables)\t\t\t\t%d trainable\t%d\t%d\t%d\n",
		len(m.Variables), trainable, elems, bytes, fileBytes)
	if err := tw.Flush(); err != nil {
		return err
	}

	if !*values {
		return nil
	}
	fmt.Fprintln(stdout)
	vw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for _, name := range r.Names() {
		t, err := r.Tensor(name)
		if err != nil {
			return err
		}
		s, err := numeric.Slice(t)
		if err != nil {
			return fmt.Errorf("%s: variable %q: %w", r.Path(), name, err)
		}
		fmt.Fprintf(vw, "%s\t%s\n", name, firstValues(s, *count))
	}
	return vw.Flush()
}

// itemSize returns the element size of a NumPy descr such as "<f4" (0 if
// it has none).
func itemSize(descr string) int64 {
	if len(descr) < 3 {
		return 0
	}
	n, err := strconv.ParseInt(descr[2:], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// shapeString writes a shape as "[2 3]", a scalar's as "scalar".
func shapeString(shape []int) string {
	if len(shape) == 0 {
		return "scalar"
	}
	return fmt.Sprint(shape)
}

// firstValues formats the first n elements of a slice as "[1 2 3 …] (of
// 10)".
func firstValues(s any, n int) string {
	v := reflect.ValueOf(s)
	k := min(n, v.Len())
	parts := make([]string, k)
	for i := range k {
		switch x := v.Index(i).Interface().(type) {
		case float32:
			parts[i] = strconv.FormatFloat(float64(x), 'g', 6, 32)
		case float64:
			parts[i] = strconv.FormatFloat(x, 'g', 6, 64)
		default:
			parts[i] = fmt.Sprint(x)
		}
	}
	out := "[" + strings.Join(parts, " ")
	if v.Len() > k {
		return out + fmt.Sprintf(" …] (%d of %d)", k, v.Len())
	}
	return out + "]"
}
