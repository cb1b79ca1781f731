// Package checkpoint is the durable format of a model directory, like
// TensorFlow's tf.train.Checkpoint and tf.compat.v1.train.Saver: it saves
// every variable of a towers.Store (weights, optimizer slots, the global
// step) and restores them, possibly into a store that does not hold them yet.
//
// A model directory looks like this:
//
//	model/
//	  checkpoint                 pointer: the latest checkpoint and the kept ones
//	  ckpt-400/
//	    manifest.json            step, creation time, and one entry per variable
//	    0000-dense~w.npy         one NumPy .npy file per variable
//	    0001-dense~w~Adam~m.npy
//	    ...
//	  ckpt-500/
//	    ...
//
// Each variable file is a plain NumPy .npy file (format 1.0), so
// numpy.load reads a checkpoint without towerflow. Its name is the variable's
// index in the store followed by the variable name made filesystem-safe
// ('/' becomes '~', other unusual characters '_'), which keeps it unique.
// The manifest records for every variable its name, NumPy dtype, shape,
// trainability, file, file size and the SHA-256 of the file, and carries a
// SHA-256 of its own content; readers verify all of them, so a truncated or
// corrupted checkpoint is an error rather than wrong weights.
//
// Save and Restore stream a variable: Save writes its file straight from
// the variable's memory, hashing the variable's bytes on another goroutine
// meanwhile, and Restore decodes the file, checking its SHA-256 as it
// goes, straight into the variable's memory, so a table of gigabytes never
// takes a second copy in memory.
// (On little-endian hosts the elements are copied as raw memory; on
// big-endian ones they are converted a chunk at a time.)
//
// Save is atomic and durable: a checkpoint is written and fsynced under a
// temporary directory, renamed into place, and only then named by the
// pointer file, which is itself replaced atomically. A process killed at any
// moment leaves every earlier checkpoint whole and the pointer naming a whole
// one. Latest and Read fall back to earlier kept checkpoints when the newest
// one is damaged (Reader.Skipped says what they passed over); when every
// checkpoint is damaged they fail with ErrDamaged, a data loss, which is not
// ErrNoCheckpoint, a fresh directory. A file that cannot be read
// (permissions, an I/O error, a named pipe or a directory where a file
// belongs, a symbolic link out of its checkpoint, a checkpoint directory
// that a link takes out of its model directory) is an error, never
// skipped: only regular files are opened.
//
// A model directory has one writer at a time: Save removes the temporary
// files an interrupted Save left behind, which would break a concurrent Save
// into the same directory. Readers may run concurrently with a writer.
package checkpoint

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/towerflow/towerflow/internal/fsutil"
	"github.com/towerflow/towerflow/towers"
)

// Format is the format name every manifest and pointer file carries.
const Format = "towerflow-checkpoint-v1"

// PointerFile is the name of the pointer file in a model directory.
const PointerFile = "checkpoint"

// ManifestFile is the name of the manifest in a checkpoint directory.
const ManifestFile = "manifest.json"

var (
	// ErrNoCheckpoint is wrapped by Latest and Read when a model directory
	// does not exist or has never held a checkpoint: a fresh run.
	ErrNoCheckpoint = errors.New("no checkpoint")
	// ErrDamaged is wrapped by Latest and Read when a model directory has
	// checkpoints (or a pointer file, which is written only once one is in
	// place) but none of them is whole: data loss, which TensorFlow
	// reports as a DataLossError. It is not ErrNoCheckpoint: a run must not
	// start afresh over damaged checkpoints, whose keep-N cleanup would
	// then delete them.
	ErrDamaged = errors.New("data loss: no checkpoint is whole")
)

// Entry describes one variable of a checkpoint.
type Entry struct {
	Name string `json:"name"`
	// Dtype is the NumPy dtype string of the file, e.g. "<f4" or "|b1".
	Dtype string `json:"dtype"`
	// GoDtype is the tensor dtype of the variable ("float32", "int", ...);
	// it tells Go's int (stored as "<i8") from int64.
	GoDtype   string `json:"go_dtype,omitempty"`
	Shape     []int  `json:"shape"` // empty for a scalar
	Trainable bool   `json:"trainable"`
	// File is the name of the variable's .npy file in the checkpoint
	// directory.
	File string `json:"file"`
	// SHA256 is the hex SHA-256 of the whole file; Bytes its size.
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
}

// Manifest describes a checkpoint: manifest.json of its directory.
type Manifest struct {
	Format    string    `json:"format"`
	Step      int64     `json:"step"`
	Created   time.Time `json:"created"`
	Variables []Entry   `json:"variables"` // in the store's creation order
}

// manifestFile is manifest.json: the manifest and the SHA-256 of its compact
// JSON encoding, which catches a corrupted manifest that still parses.
type manifestFile struct {
	Manifest
	Checksum string `json:"manifest_sha256"`
}

func (m Manifest) checksum() (string, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

func (m Manifest) clone() Manifest {
	m.Variables = slices.Clone(m.Variables)
	for i := range m.Variables {
		m.Variables[i].Shape = slices.Clone(m.Variables[i].Shape)
	}
	return m
}

// pointer is the pointer file: like TensorFlow's "checkpoint" file, it names
// the latest checkpoint and every kept one, oldest saved first.
type pointer struct {
	Format      string   `json:"format"`
	Latest      string   `json:"latest"`
	Checkpoints []string `json:"checkpoints"`
}

var ckptRe = regexp.MustCompile(`^ckpt-(0|[1-9][0-9]*)$`)

// Name returns the directory name of the checkpoint of step: "ckpt-<step>".
func Name(step int64) string { return "ckpt-" + strconv.FormatInt(step, 10) }

func parseName(name string) (int64, bool) {
	m := ckptRe.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	step, err := strconv.ParseInt(m[1], 10, 64)
	return step, err == nil
}

// Prefixes of the entries an interrupted Save may leave in a model directory.
const (
	tmpPrefix     = ".tmp-" // .tmp-ckpt-<step>-<random>: a checkpoint being written
	asidePrefix   = ".old-" // .old-ckpt-<step>-<random>: a checkpoint being replaced
	tmpPointerPat = ".checkpoint-*.tmp"
)

// Save writes every variable of store as the checkpoint "ckpt-<step>" in dir
// (created if needed), points dir's pointer file at it, then deletes the
// oldest saved checkpoints beyond the newest keep (keep 0 keeps all). Saving
// a step that already has a checkpoint replaces it. It returns the path of
// the new checkpoint.
//
// The new checkpoint is read back and verified before it is renamed into
// place: its manifest as Read reads it, each file's size and header as
// Read checks them and its bytes compared with the variable's, whose
// SHA-256 the manifest holds (one hash of a table, not a second one of the
// file read back). One that does not verify is an error, and then nothing
// is replaced or deleted. So the cleanup of old checkpoints never
// deletes the newest checkpoint that verifies: the one just written.
//
// Save reads the variables' live backings, so like the store's setters it
// must not run while towers run a step. See the package comment for the
// atomicity guarantees.
func Save(dir string, store *towers.Store, step int64, keep int) (string, error) {
	if store == nil {
		return "", fmt.Errorf("checkpoint: save: nil store")
	}
	if step < 0 {
		return "", fmt.Errorf("checkpoint: save: negative step %d", step)
	}
	if keep < 0 {
		return "", fmt.Errorf("checkpoint: save: negative keep %d", keep)
	}
	if m := store.Mismatched(); len(m) > 0 {
		return "", fmt.Errorf("checkpoint: save: the store holds variables made anew for a model that does not match the checkpoint restored: %s", strings.Join(m, "; "))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("checkpoint: save: %w", err)
	}
	if err := cleanStale(dir); err != nil {
		return "", fmt.Errorf("checkpoint: save: clean up an interrupted save: %w", err)
	}
	name := Name(step)
	// The kept checkpoints, before anything is written: a pointer file
	// that cannot be read fails the Save here.
	kept, err := keptCheckpoints(dir)
	if err != nil {
		return "", fmt.Errorf("checkpoint: save %s: %w", filepath.Join(dir, name), err)
	}
	path, err := writeCheckpoint(dir, name, store, step)
	if err != nil {
		return "", fmt.Errorf("checkpoint: save %s: %w", filepath.Join(dir, name), err)
	}
	if err := updatePointer(dir, name, kept, keep); err != nil {
		return "", fmt.Errorf("checkpoint: save %s: %w", path, err)
	}
	return path, nil
}

// writeCheckpoint writes the checkpoint under a temporary directory and
// renames it to dir/name, replacing an existing one.
func writeCheckpoint(dir, name string, store *towers.Store, step int64) (string, error) {
	tmp, err := mkdirTemp(dir, tmpPrefix+name+"-")
	if err != nil {
		return "", err
	}
	defer func() {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
	}()
	m := Manifest{Format: Format, Step: step, Created: time.Now().UTC().Round(0), Variables: []Entry{}}
	buf := make([]byte, 1<<20) // the read-back's, shared
	for i, v := range store.Variables() {
		e, err := writeVariable(tmp, i, v, buf)
		if err != nil {
			return "", fmt.Errorf("variable %q: %w", v.Name(), err)
		}
		m.Variables = append(m.Variables, e)
	}
	sum, err := m.checksum()
	if err != nil {
		return "", err
	}
	mb, err := json.MarshalIndent(manifestFile{Manifest: m, Checksum: sum}, "", "  ")
	if err != nil {
		return "", err
	}
	if err := fsutil.WriteFileSync(filepath.Join(tmp, ManifestFile), append(mb, '\n')); err != nil {
		return "", err
	}
	if err := fsutil.SyncDir(tmp); err != nil {
		return "", err
	}
	// Read it back before it replaces or outlives anything (writeVariable
	// read back each file): a checkpoint that does not verify must not
	// push a whole one out of the kept ones.
	if err := verifyManifest(tmp, m); err != nil {
		return "", fmt.Errorf("%s: %w", notReadBack, err)
	}

	final := filepath.Join(dir, name)
	aside := ""
	if _, err := os.Lstat(final); err == nil {
		// Replace an existing checkpoint of this step: move it aside, move
		// the new one in, drop the old. A crash in between leaves the old
		// one aside, where Latest still finds it and the next Save moves
		// it back.
		aside = filepath.Join(dir, asidePrefix+strings.TrimPrefix(filepath.Base(tmp), tmpPrefix))
		if err := os.Rename(final, aside); err != nil {
			return "", err
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		if aside != "" {
			os.Rename(aside, final)
		}
		return "", err
	}
	tmp = ""
	if err := fsutil.SyncDir(dir); err != nil {
		return "", err
	}
	if aside != "" {
		if err := os.RemoveAll(aside); err != nil {
			return "", err
		}
	}
	return final, nil
}

// mkdirTemp is os.MkdirTemp with the permissions of os.Mkdir(0o755) (minus
// the umask) rather than 0o700, since the directory becomes the checkpoint.
func mkdirTemp(dir, prefix string) (string, error) {
	for {
		p := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		err := os.Mkdir(p, 0o755)
		if !errors.Is(err, fs.ErrExist) {
			return p, err
		}
	}
}

// notReadBack begins the error of a Save whose checkpoint does not read
// back whole.
const notReadBack = "the checkpoint written does not read back whole, so nothing was replaced or deleted"

// writeVariable writes variable number i of the store as a .npy file in
// dir, syncs it and reads it back. The bytes are writeNPY's of the
// variable, straight from its backing (bufio passes a write larger than
// its buffer through): no copy of a table is made. Their SHA-256 is
// taken on another goroutine, of the bytes writeNPY makes of the variable
// again, while this one writes, syncs and reads back the file, comparing
// it with those bytes once more: a file that compares equal holds what was
// hashed, so a table is hashed once and the save takes about the longer
// of hashing and writing, syncing and reading back rather than their sum.
// The variable must not change meanwhile (Save's contract); if it did,
// the comparison or a reader's check of the SHA-256 fails.
// buf is the read-back's buffer.
func writeVariable(dir string, i int, v *towers.Variable, buf []byte) (Entry, error) {
	if !utf8.ValidString(v.Name()) {
		return Entry{}, fmt.Errorf("name is not valid UTF-8")
	}
	t, err := npyTypeOf(v.Dtype())
	if err != nil {
		return Entry{}, err
	}
	shape := append([]int{}, v.Shape()...)
	data := v.Data()
	e := Entry{
		Name:      v.Name(),
		Dtype:     t.descr,
		GoDtype:   v.Dtype().String(),
		Shape:     shape,
		Trainable: v.Trainable(),
		File:      fmt.Sprintf("%04d-%s.npy", i, safeName(v.Name())),
	}
	h := sha256.New()
	hashed := make(chan error, 1)
	go func() { hashed <- writeNPY(h, v.Dtype(), shape, data) }()
	waited := false
	defer func() {
		if !waited {
			<-hashed // the hash reads the variable: never outlive the Save
		}
	}()
	f, err := os.OpenFile(filepath.Join(dir, e.File), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return Entry{}, err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := writeNPY(bw, v.Dtype(), shape, data); err != nil {
		return Entry{}, fmt.Errorf("%s: %w", f.Name(), err)
	}
	if err := bw.Flush(); err != nil {
		return Entry{}, err
	}
	if err := f.Sync(); err != nil {
		return Entry{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		return Entry{}, err
	}
	if err := f.Close(); err != nil {
		return Entry{}, err
	}
	e.Bytes = fi.Size()
	if err := verifyFile(dir, e, v.Dtype(), data, buf); err != nil {
		return Entry{}, fmt.Errorf("%s: %w", notReadBack, err)
	}
	waited = true
	if err := <-hashed; err != nil {
		return Entry{}, fmt.Errorf("hash: %w", err)
	}
	e.SHA256 = hex.EncodeToString(h.Sum(nil))
	return e, nil
}

// safeName makes a variable name usable in a file name: '/' becomes '~',
// characters other than ASCII letters, digits, '.', '_', '-' and '~' become
// '_', and it is cut to 100 bytes. The index prefix keeps names unique.
func safeName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r == '/':
			b.WriteByte('~')
		case r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-~", r)):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 100 {
			break
		}
	}
	return b.String()
}

// keptCheckpoints returns the checkpoints dir's pointer file keeps, oldest
// saved first. A missing or damaged pointer file is rebuilt from the
// checkpoint directories, by step; one that cannot be read is an error.
func keptCheckpoints(dir string) ([]string, error) {
	p, err := readPointer(dir)
	if err == nil {
		return p.Checkpoints, nil
	}
	if unreadable(err) {
		return nil, fmt.Errorf("pointer file: %w", err)
	}
	// Missing or damaged: the pointer is derived data.
	return scan(dir)
}

// updatePointer makes name the latest checkpoint of dir, after the
// previously kept ones, keeping the newest keep saved ones (all if keep is
// 0), and deletes the others.
func updatePointer(dir, name string, kept []string, keep int) error {
	kept = slices.DeleteFunc(slices.Clone(kept), func(s string) bool { return s == name })
	kept = append(kept, name)
	if keep > 0 && len(kept) > keep {
		kept = kept[len(kept)-keep:]
	}
	b, err := json.MarshalIndent(pointer{Format: Format, Latest: name, Checkpoints: kept}, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.ReplaceFile(dir, PointerFile, tmpPointerPat, append(b, '\n')); err != nil {
		return fmt.Errorf("pointer file: %w", err)
	}
	if keep == 0 {
		return nil
	}
	// Delete every checkpoint directory the pointer does not keep: the ones
	// just dropped and any an interrupted Save failed to delete.
	all, err := scan(dir)
	if err != nil {
		return err
	}
	for _, c := range all {
		if !slices.Contains(kept, c) {
			if err := os.RemoveAll(filepath.Join(dir, c)); err != nil {
				return fmt.Errorf("delete old checkpoint: %w", err)
			}
		}
	}
	return nil
}

// readPointer reads and checks dir's pointer file. A missing file gives an
// error wrapping fs.ErrNotExist; one that cannot be read an error for which
// unreadable is true; a damaged one any other error.
func readPointer(dir string) (pointer, error) {
	b, err := readRegular(dir, PointerFile, maxPointerBytes)
	if err != nil {
		return pointer{}, err
	}
	var p pointer
	if err := json.Unmarshal(b, &p); err != nil {
		return pointer{}, fmt.Errorf("%s: %w", filepath.Join(dir, PointerFile), err)
	}
	bad := func(format string, args ...any) (pointer, error) {
		return pointer{}, fmt.Errorf("%s: %s", filepath.Join(dir, PointerFile), fmt.Sprintf(format, args...))
	}
	if p.Format != Format {
		return bad("format %q, want %q", p.Format, Format)
	}
	if len(p.Checkpoints) == 0 || p.Checkpoints[len(p.Checkpoints)-1] != p.Latest {
		return bad("latest %q is not the last of the kept checkpoints %q", p.Latest, p.Checkpoints)
	}
	seen := map[string]bool{}
	for _, c := range p.Checkpoints {
		if _, ok := parseName(c); !ok || seen[c] {
			return bad("bad or repeated checkpoint name %q", c)
		}
		seen[c] = true
	}
	return p, nil
}

// scan returns the names of dir's checkpoint directories by increasing step.
func scan(dir string) ([]string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type named struct {
		name string
		step int64
	}
	var found []named
	for _, de := range des {
		if step, ok := parseName(de.Name()); ok && de.IsDir() {
			found = append(found, named{de.Name(), step})
		}
	}
	slices.SortFunc(found, func(a, b named) int { return cmpInt(a.step, b.step) })
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f.name
	}
	return out, nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cleanStale removes what an interrupted Save left in dir: temporary
// checkpoint directories and pointer files, and checkpoints moved aside for
// a replacement, which go back into place when the replacement never
// arrived.
func cleanStale(dir string) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, de := range des {
		n := de.Name()
		p := filepath.Join(dir, n)
		switch {
		case strings.HasPrefix(n, tmpPrefix+"ckpt-"):
			err = os.RemoveAll(p)
		case strings.HasPrefix(n, asidePrefix+"ckpt-"):
			orig := asideOf(n)
			if _, ok := parseName(orig); !ok {
				continue
			}
			if _, statErr := os.Lstat(filepath.Join(dir, orig)); errors.Is(statErr, fs.ErrNotExist) {
				if err = os.Rename(p, filepath.Join(dir, orig)); err == nil {
					err = fsutil.SyncDir(dir)
				}
			} else {
				err = os.RemoveAll(p)
			}
		default:
			if ok, _ := filepath.Match(tmpPointerPat, n); ok {
				err = os.Remove(p)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// asideOf returns the checkpoint name of an aside directory name
// ".old-ckpt-<step>-<random>".
func asideOf(n string) string {
	n = strings.TrimPrefix(n, asidePrefix)
	if i := strings.LastIndexByte(n, '-'); i > 0 {
		return n[:i]
	}
	return n
}
