package checkpoint

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/fsutil"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/towers"
)

// Reader reads the variables of one verified checkpoint. Its methods are
// safe for concurrent use.
type Reader struct {
	path   string
	m      Manifest
	index  map[string]int
	dtypes []tensor.Dtype // of m.Variables
	// skipped says what reading a model directory passed over on the way
	// to this checkpoint.
	skipped []string
}

// Skipped returns what reading a model directory passed over on the way to
// this checkpoint, one line each: damaged or missing newer checkpoints, a
// damaged or missing pointer file. The caller decides whether to log
// them; the package logs nothing.
func (r *Reader) Skipped() []string { return slices.Clone(r.skipped) }

// Read opens and verifies a checkpoint. path is a checkpoint directory
// (holding manifest.json, or named ckpt-<step>) or a model directory, which
// means its Latest checkpoint (see Latest for what it skips and its errors).
// A bad manifest, a missing, truncated or corrupted variable file is an
// error naming the file, and so is a file that cannot be read: the
// manifest and the variable files must be regular files (or symbolic links
// to regular files in the checkpoint directory).
func Read(path string) (*Reader, error) {
	if isCheckpointDir(path) {
		r, err := open(path)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
		return r, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("checkpoint: %s is not a directory", path)
	}
	return latest(path)
}

// openFile opens a file of a checkpoint or model directory when it is a
// regular file there; tests replace it to make files unreadable.
var openFile = fsutil.OpenRegular

// readRegular reads a file that openFile opens, if it holds at most limit
// bytes: a larger one is damage (fsutil.ReadAtMost).
func readRegular(dir, name string, limit int64) ([]byte, error) {
	f, _, err := openFile(dir, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return fsutil.ReadAtMost(f, filepath.Join(dir, name), limit)
}

// Bounds on the metadata files a reader reads whole, far above any real
// one: a manifest entry takes about 250 bytes, so 64 MiB is a quarter of a
// million variables; a pointer file names each kept checkpoint in about 20.
const (
	maxManifestBytes = 64 << 20
	maxPointerBytes  = 16 << 20
)

// pathErr returns err, which is about the file p, naming p unless it does.
func pathErr(p string, err error) error {
	if strings.Contains(err.Error(), p) {
		return err
	}
	return fmt.Errorf("%s: %w", p, err)
}

func isCheckpointDir(path string) bool {
	if _, err := os.Stat(filepath.Join(path, ManifestFile)); err == nil {
		return true
	}
	base := filepath.Base(path)
	_, ok := parseName(base)
	return ok || strings.HasPrefix(base, asidePrefix+"ckpt-")
}

// open reads the manifest of the checkpoint directory path and verifies
// every variable file.
func open(path string) (*Reader, error) {
	m, dtypes, err := readManifest(path)
	if err != nil {
		return nil, err
	}
	r := &Reader{path: path, m: m, index: map[string]int{}, dtypes: dtypes}
	for i, e := range m.Variables {
		r.index[e.Name] = i
		if _, err := r.readFile(i, false); err != nil {
			return nil, err
		}
	}
	return r, nil
}

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// readManifest reads and checks path's manifest.json.
func readManifest(path string) (Manifest, []tensor.Dtype, error) {
	mpath := filepath.Join(path, ManifestFile)
	fail := func(format string, args ...any) (Manifest, []tensor.Dtype, error) {
		return Manifest{}, nil, fmt.Errorf("%s: %s", mpath, fmt.Sprintf(format, args...))
	}
	b, err := readRegular(path, ManifestFile, maxManifestBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return fail("manifest is missing")
	}
	if err != nil {
		return Manifest{}, nil, pathErr(mpath, err)
	}
	var mf manifestFile
	if err := json.Unmarshal(b, &mf); err != nil {
		return fail("bad manifest: %v", err)
	}
	m := mf.Manifest
	if m.Format != Format {
		return fail("format %q, want %q", m.Format, Format)
	}
	if sum, err := m.checksum(); err != nil || sum != mf.Checksum {
		return fail("manifest is corrupted: its checksum %q does not match its content", mf.Checksum)
	}
	if m.Step < 0 {
		return fail("negative step %d", m.Step)
	}
	// A checkpoint directory named for a step holds that step's manifest:
	// Latest orders checkpoints by their names.
	if s, ok := parseName(filepath.Base(path)); ok && s != m.Step {
		return fail("manifest is of step %d, but its directory's name says step %d", m.Step, s)
	}
	names, files := map[string]bool{}, map[string]bool{}
	dtypes := make([]tensor.Dtype, len(m.Variables))
	for i, e := range m.Variables {
		switch {
		case e.Name == "":
			return fail("variable %d has no name", i)
		case names[e.Name]:
			return fail("variable %q is listed twice", e.Name)
		case e.File == "" || e.File != filepath.Base(e.File) || e.File == "." || e.File == ".." ||
			strings.ContainsAny(e.File, `/\`) || files[e.File] || e.File == ManifestFile:
			return fail("variable %q: bad or repeated file name %q", e.Name, e.File)
		case !hexSHA256.MatchString(e.SHA256):
			return fail("variable %q: bad sha256 %q", e.Name, e.SHA256)
		case e.Bytes < 0:
			return fail("variable %q: negative size %d", e.Name, e.Bytes)
		}
		if _, err := shapeSize(e.Shape); err != nil {
			return fail("variable %q: %v", e.Name, err)
		}
		dt, err := entryDtype(e)
		if err != nil {
			return fail("variable %q: %v", e.Name, err)
		}
		names[e.Name], files[e.File], dtypes[i] = true, true, dt
		if m.Variables[i].Shape == nil {
			m.Variables[i].Shape = []int{}
		}
	}
	return m, dtypes, nil
}

// entryDtype returns the tensor dtype of an entry: its GoDtype when given
// (which must agree with its NumPy dtype), else the natural one of Dtype.
func entryDtype(e Entry) (tensor.Dtype, error) {
	t, _, err := npyParseDescr(e.Dtype)
	if err != nil {
		return tensor.Dtype{}, err
	}
	if e.GoDtype == "" || e.GoDtype == t.dtype.String() {
		return t.dtype, nil
	}
	for _, u := range npyTypes {
		if u.dtype.String() == e.GoDtype {
			if u.descr[1:] != t.descr[1:] {
				return tensor.Dtype{}, fmt.Errorf("go dtype %q does not match dtype %q", e.GoDtype, e.Dtype)
			}
			return u.dtype, nil
		}
	}
	return tensor.Dtype{}, fmt.Errorf("unsupported go dtype %q", e.GoDtype)
}

// readFile verifies variable i's file — size, header against the manifest,
// SHA-256 — and with decode returns its elements in a new slice. Its
// errors, which name the variable and the file, wrap those of reading the
// file, so that unreadable tells them from damage.
func (r *Reader) readFile(i int, decode bool) (any, error) {
	if !decode {
		return nil, r.readInto(i, nil)
	}
	var data any
	err := r.readInto(i, func() any {
		n, _ := shapeSize(r.m.Variables[i].Shape)
		data = numeric.NewSlice(r.dtypes[i], int(n))
		return data
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// readInto verifies variable i's file as readFile does, reading it once:
// with dst non-nil it decodes the elements, as it hashes them, into the
// slice dst returns (of the variable's dtype and size), which it asks for
// once the file's size and header have been checked; with dst nil it only
// verifies. When it fails after asking dst, the slice may hold part of
// the file.
func (r *Reader) readInto(i int, dst func() any) error {
	e, dt := r.m.Variables[i], r.dtypes[i]
	fpath := filepath.Join(r.path, e.File)
	fail := func(format string, args ...any) error {
		return fmt.Errorf("variable %q: %s: %w", e.Name, fpath, fmt.Errorf(format, args...))
	}
	f, fi, err := openFile(r.path, e.File)
	if errors.Is(err, fs.ErrNotExist) {
		return fail("variable file is missing")
	}
	if err != nil {
		return fmt.Errorf("variable %q: %w", e.Name, pathErr(fpath, err))
	}
	defer f.Close()
	if fi.Size() != e.Bytes {
		what := "has extra bytes"
		if fi.Size() < e.Bytes {
			what = "is truncated"
		}
		return fail("file %s: %d bytes, the manifest says %d", what, fi.Size(), e.Bytes)
	}
	h := sha256.New()
	br := bufio.NewReaderSize(io.TeeReader(f, h), 1<<16)
	hdr, err := readNPYHeader(br)
	if err != nil {
		return fail("%w", err)
	}
	if hdr.Descr != e.Dtype || hdr.Fortran || !slices.Equal(hdr.Shape, e.Shape) {
		return fail("file holds dtype %s shape %v fortran_order %v, the manifest says dtype %s shape %v",
			hdr.Descr, hdr.Shape, hdr.Fortran, e.Dtype, e.Shape)
	}
	t, _, _ := npyParseDescr(e.Dtype)
	n, _ := shapeSize(e.Shape)
	if n > (math.MaxInt64-hdr.Len)/int64(t.size) {
		return fail("shape %v is too large for a file", e.Shape)
	}
	if want := hdr.Len + n*int64(t.size); want != e.Bytes {
		return fail("header and shape make %d bytes, the manifest says %d", want, e.Bytes)
	}
	if dst != nil {
		if err := readNPYInto(br, hdr, dt, dst()); err != nil {
			return fail("%w", err)
		}
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return fail("%w", err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != e.SHA256 {
		return fail("file is corrupted: sha256 %s, the manifest says %s", sum, e.SHA256)
	}
	return nil
}

// Path returns the checkpoint directory.
func (r *Reader) Path() string { return r.path }

// Manifest returns a copy of the checkpoint's manifest.
func (r *Reader) Manifest() Manifest { return r.m.clone() }

// Step returns the global step the checkpoint was saved at.
func (r *Reader) Step() int64 { return r.m.Step }

// Names returns the checkpoint's variable names in the saved store's
// creation order.
func (r *Reader) Names() []string {
	out := make([]string, len(r.m.Variables))
	for i, e := range r.m.Variables {
		out[i] = e.Name
	}
	return out
}

// Tensor reads the named variable, verifying its file again, into a new
// tensor (rank 0 for a scalar).
func (r *Reader) Tensor(name string) (*tensor.Dense, error) {
	i, ok := r.index[name]
	if !ok {
		return nil, fmt.Errorf("checkpoint %s: variable %q: %w", r.path, name, towers.ErrNotFound)
	}
	data, err := r.readFile(i, true)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", r.path, err)
	}
	return numeric.Over(tensor.Shape(slices.Clone(r.m.Variables[i].Shape)), data), nil
}

// Restore copies every variable of the checkpoint into store. A variable the
// store lacks is created with the checkpoint's dtype, shape and
// trainability, so optimizer slots and the global step exist before an
// optimizer or estimator asks for them; it is placed beside the variable
// whose name is its longest '/'-prefix when there is one ("w/Adam/m" beside
// "w", as optimizers place slots), else on the store's parameter server
// until model code asks for it (towers.Scope.Variable), which places it as
// in a fresh run, with the variables beside it. Model code that asks for a
// restored variable with another shape or dtype gets a new variable of
// its own, marked (towers.Store.Mismatched): no step runs and no
// checkpoint is saved until a checkpoint that fits is restored into it.
//
// Restore is strict about the model, as TensorFlow's restore is ("Key not
// found in checkpoint"): every model variable the store holds (one that
// model code asked for, towers.Variable.FromModel) must be in the
// checkpoint, and every variable the store and the checkpoint both hold
// must have the same shape and dtype; otherwise it returns a
// *MismatchError naming them and writes nothing. Other store variables
// the checkpoint lacks — optimizer slots of an optimizer the checkpoint's
// run did not use — are left alone: they start fresh. Variables the model
// has not asked for yet are not known here: compare them once it has
// (Compare).
//
// Restore streams: each file is decoded, as its SHA-256 is checked, straight
// into the backing of the store's variable (of a new variable, its one
// backing), so restoring a table takes no second copy of it in memory. A
// file that no longer verifies (changed since Read) is an error naming it;
// the variables restored before it then hold the checkpoint's values, the
// store's variable of that file part of it (a variable the store lacked is
// not created). Like Save, Restore writes the variables' live backings: it
// must not run while towers run a step.
func (r *Reader) Restore(store *towers.Store) error {
	if store == nil {
		return fmt.Errorf("checkpoint: restore %s: nil store", r.path)
	}
	var held []*towers.Variable
	for _, v := range store.Variables() {
		if _, ok := r.index[v.Name()]; ok || v.FromModel() {
			held = append(held, v)
		}
	}
	if err := r.Compare(held, nil); err != nil {
		return fmt.Errorf("checkpoint: restore: %w", err)
	}
	for i, e := range r.m.Variables {
		// A variable the store lacks is created with the file decoded
		// straight into its new backing (no variable is created when the
		// file does not verify); one it holds gets the file decoded
		// straight into its backing.
		var readErr error
		spec := towers.VarSpec{
			Name:      e.Name,
			Dtype:     r.dtypes[i],
			Shape:     tensor.Shape(slices.Clone(e.Shape)),
			Trainable: e.Trainable,
			Colocate:  owner(store, e.Name),
			From:      r.path,
			Init: func(_ *rand.Rand, _ tensor.Dtype, _ tensor.Shape, backing any) error {
				readErr = r.readInto(i, func() any { return backing })
				return readErr
			},
		}
		v, created, err := store.GetOrCreate(spec)
		if readErr != nil {
			return fmt.Errorf("checkpoint %s: %w", r.path, readErr)
		}
		if err != nil {
			return fmt.Errorf("checkpoint: restore %s: %w", r.path, err)
		}
		if !created {
			if err := r.readInto(i, v.Data); err != nil {
				return fmt.Errorf("checkpoint %s: %w", r.path, err)
			}
			store.Restored(e.Name) // of its own shape: a mismatch is over
		}
	}
	return nil
}

// checkMatch checks that the store variable name, if the store holds it,
// has exactly the shape and dtype of checkpoint variable ckptName.
func (r *Reader) checkMatch(store *towers.Store, name, ckptName string) error {
	v, err := store.Lookup(name)
	if errors.Is(err, towers.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if d := r.differ(v, name, r.index[ckptName]); d != "" {
		return errors.New(d)
	}
	return nil
}

// owner returns the store variable whose name is the longest proper
// '/'-prefix of name, or "".
func owner(store *towers.Store, name string) string {
	for i := strings.LastIndexByte(name, '/'); i > 0; i = strings.LastIndexByte(name[:i], '/') {
		if _, err := store.Lookup(name[:i]); err == nil {
			return name[:i]
		}
	}
	return ""
}

// WarmStart initialises variables of store from this checkpoint of another
// run, like TensorFlow's tf.estimator.WarmStartSettings. (Read a model
// directory to start from its latest checkpoint; Skipped says what that
// passed over.)
//
// Like TensorFlow's vars_to_warm_start given as a regular expression, only
// trainable variables are candidates: non-trainable ones — the global step,
// optimizer slots, moving statistics — start fresh. pattern is a regular
// expression (Go syntax, unanchored: use ^...$ to match whole names)
// selecting among the trainable variables by their name in store; "" selects
// every trainable variable. To copy a non-trainable variable, read it with
// Read and Reader.Tensor and set it with Store.Set.
//
// rename maps a store variable's name to its name in the checkpoint, like
// var_name_to_prev_var_name; unmapped variables keep their name. It is an
// error, naming the variables, when a selected variable is missing from the
// checkpoint or differs in shape or dtype, when a rename key is not a
// selected variable, or when pattern selects nothing. Everything is checked
// before any variable is written.
func (r *Reader) WarmStart(store *towers.Store, pattern string, rename map[string]string) error {
	if store == nil {
		return fmt.Errorf("checkpoint: warm start: nil store")
	}
	var re *regexp.Regexp
	if pattern != "" {
		var err error
		if re, err = regexp.Compile(pattern); err != nil {
			return fmt.Errorf("checkpoint: warm start: pattern: %w", err)
		}
	}
	type pick struct{ name, from string }
	var picks []pick
	selected := map[string]bool{}
	for _, v := range store.Variables() {
		if !v.Trainable() || (re != nil && !re.MatchString(v.Name())) {
			continue
		}
		from := v.Name()
		if to, ok := rename[v.Name()]; ok {
			from = to
		}
		picks = append(picks, pick{v.Name(), from})
		selected[v.Name()] = true
	}
	var unused []string
	for name := range rename {
		if !selected[name] {
			unused = append(unused, name)
		}
	}
	if len(unused) > 0 {
		slices.Sort(unused)
		return fmt.Errorf("checkpoint: warm start: rename names variables that are not warm-started (not in the store, not trainable or not matching %q): %q",
			pattern, unused)
	}
	if len(picks) == 0 {
		return fmt.Errorf("checkpoint: warm start: pattern %q selects no trainable variable of the store", pattern)
	}
	var missing []string
	for _, p := range picks {
		_, ok := r.index[p.from]
		if !ok {
			if p.from == p.name {
				missing = append(missing, fmt.Sprintf("%q", p.name))
			} else {
				missing = append(missing, fmt.Sprintf("%q (as %q)", p.name, p.from))
			}
			continue
		}
		if err := r.checkMatch(store, p.name, p.from); err != nil {
			return fmt.Errorf("checkpoint: warm start from %s: %w", r.path, err)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("checkpoint: warm start: checkpoint %s lacks variables %s (it has %q)",
			r.path, strings.Join(missing, ", "), r.Names())
	}
	for _, p := range picks {
		v, err := store.Lookup(p.name)
		if err != nil {
			return fmt.Errorf("checkpoint: warm start: %w", err)
		}
		// Decoded straight into the variable's backing: checkMatch above
		// made sure the shapes and dtypes agree.
		if err := r.readInto(r.index[p.from], v.Data); err != nil {
			return fmt.Errorf("checkpoint: warm start: checkpoint %s: %w", r.path, err)
		}
	}
	return nil
}
