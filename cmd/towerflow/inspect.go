package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/internal/exportdir"
	"github.com/towerflow/towerflow/internal/fsutil"
	"github.com/towerflow/towerflow/internal/numeric"
)

const inspectSynopsis = "[-values] [-n count] <checkpoint dir, model dir or export version dir>"

// inspect is the inspect command: it prints a checkpoint's path, step,
// format and variables, the trainable parameters' count beside the
// elements of every variable, and warns on stderr of what reading a model
// directory passed over (a damaged newer checkpoint, a lost pointer file).
// Given an export version directory it prints its signatures too, its
// preprocessor and the raw features that reads (for a kind this program
// registers), and the variables the export holds.
func inspect(stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	values := fs.Bool("values", false, "print the first values of each variable")
	count := fs.Int("n", 6, "how many values -values prints per variable")
	pos, err := parseFlags(fs, inspectSynopsis, stdout, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("inspect wants one checkpoint, model or export version directory, got %d arguments", len(pos))
	}
	if *count < 1 {
		return usagef("-n %d: want at least 1", *count)
	}
	dir := pos[0]
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("%s is a file, not a checkpoint, model or export version directory", dir)
	}
	sigs, err := readExportSignatures(dir)
	if err != nil {
		return err
	}
	if sigs != nil {
		dir = filepath.Join(dir, exportdir.VariablesDir)
	}
	r, err := checkpoint.Read(dir)
	if err != nil {
		if vs, verr := estimator.Versions(dir); verr == nil && len(vs) > 0 {
			return fmt.Errorf("%w (%s holds export versions: inspect one, e.g. %s)", err, dir, filepath.Join(dir, strconv.FormatInt(vs[len(vs)-1], 10)))
		}
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
	if sigs != nil {
		printSignatures(stdout, sigs)
		if err := printPreprocessor(stdout, pos[0]); err != nil {
			fmt.Fprintf(stderr, "towerflow inspect: warning: the export's preprocessor: %v\n", err)
		}
	}
	fmt.Fprintln(stdout)

	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "NAME\tDTYPE\tNPY\tSHAPE\tTRAINABLE\tELEMENTS\tBYTES\tFILE BYTES\n")
	var elems, bytes, fileBytes, trainable, params int64
	for _, e := range m.Variables {
		n := int64(1)
		for _, d := range e.Shape {
			n *= int64(d)
		}
		b := n * itemSize(e.Dtype)
		elems, bytes, fileBytes = elems+n, bytes+b, fileBytes+e.Bytes
		if e.Trainable {
			trainable++
			params += n
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
	fmt.Fprintf(stdout, "\nparameters: %d trainable, of %d elements in all (optimizer slots and counters included)\n", params, elems)

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

// readExportSignatures reads the signatures of dir when it is an export
// version directory (it holds signatures.json); nil when it is not. It
// reads only a regular file, as export.Load does.
func readExportSignatures(dir string) (*exportdir.Signatures, error) {
	b, err := fsutil.ReadRegularAtMost(dir, exportdir.SignaturesFile, exportdir.MaxSignaturesBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var sigs exportdir.Signatures
	if err := json.Unmarshal(b, &sigs); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, exportdir.SignaturesFile), err)
	}
	return &sigs, nil
}

// printSignatures lists an export's signatures: key and method, then each
// input and output with its dtype and shape.
func printSignatures(w io.Writer, sigs *exportdir.Signatures) {
	fmt.Fprintf(w, "export:     %s, global step %d\n", sigs.Format, sigs.Step)
	for _, key := range slices.Sorted(maps.Keys(sigs.Signatures)) {
		sig := sigs.Signatures[key]
		fmt.Fprintf(w, "signature:  %q (%s)\n", key, sig.Method)
		for _, part := range []struct {
			what  string
			infos map[string]exportdir.TensorInfo
		}{{"input", sig.Inputs}, {"output", sig.Outputs}} {
			for _, name := range slices.Sorted(maps.Keys(part.infos)) {
				ti := part.infos[name]
				fmt.Fprintf(w, "  %-6s    %s %s %v\n", part.what, name, ti.Dtype, ti.Shape)
			}
		}
	}
}

// printPreprocessor names the preprocessor of export version directory
// dir, if it has one, and the raw features it reads (what requests send;
// the signatures' inputs are what it makes of them) when its kind is one
// this program has registered.
func printPreprocessor(w io.Writer, dir string) error {
	b, err := fsutil.ReadRegularAtMost(dir, exportdir.PreprocessorFile, exportdir.MaxPreprocessorBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var pre exportdir.Preprocessor
	if err := json.Unmarshal(b, &pre); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, filepath.FromSlash(exportdir.PreprocessorFile)), err)
	}
	if !slices.Contains(export.PreprocessorKinds(), pre.Kind) {
		fmt.Fprintf(w, "preprocessor: %s (not a kind this program knows: its raw features are not listed)\n", pre.Kind)
		return nil
	}
	p, kind, err := export.LoadPreprocessor(dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "preprocessor: %s: requests send raw features, the inputs above are what it makes of them\n", kind)
	rs, ok := p.(dataset.RawSpecer)
	if !ok {
		return nil
	}
	spec := rs.RawSpec()
	for _, name := range slices.Sorted(maps.Keys(spec)) {
		fs := spec[name]
		what, shape := "raw", shapeString(fs.Shape)
		if fs.Label {
			what = "label"
		}
		if fs.VarLen {
			shape = "any number"
		}
		fmt.Fprintf(w, "  %-6s    %s %s %s\n", what, name, fs.Dtype, shape)
	}
	return nil
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
