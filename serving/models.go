package serving

// The models a server is configured with: their checks, and loading their
// first versions, the newest and those their labels name.

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/internal/exportdir"
	"github.com/towerflow/towerflow/replicate"
)

// ModelConfig names one model a Server serves and where its versions come
// from.
type ModelConfig struct {
	// Name is the model's name in URLs: /v1/models/{Name}. It must not
	// be empty nor contain '/' or ':'.
	Name string
	// BaseDir holds the model's export versions (<BaseDir>/<version>/, as
	// Estimator.Export writes them); the newest that loads is served. A
	// version directory is named by a positive integer in canonical
	// decimal ("12", not "012" or "+12"); other directories are ignored
	// (and logged once). A version that fails to load is shown by the
	// status API as END with its error, logged, and not tried again; the
	// newest older one that loads is served instead.
	BaseDir string
	// Model is the model function the versions are loaded into, with the
	// devices it is replicated over (see export.Load).
	Model *replicate.Model
	// Loader, when set, replaces loading from BaseDir: it is called with
	// the version being served (0 when there is none yet) and returns the
	// version to serve instead, or nil and no error to keep the current
	// one. A version returned with an error is served, and the error
	// reported (by Reload, and logged) as that of other versions. A Loader replaces BaseDir and Model: giving both is an error.
	Loader func(current int64) (Servable, error)

	// Labels names versions, as TensorFlow Serving's version labels do:
	// /v1/models/{Name}/labels/{label} is served by version Labels[label],
	// e.g. {"stable": 3, "canary": 4}. A label is made of letters,
	// digits and underscores. Every version a label names is loaded when
	// the server starts (an error if it cannot be) and served beside the
	// newest until the server closes: a reload that replaces the newest
	// version keeps it when a label names it. A label the model does not
	// have is answered with 400 Bad Request, as TensorFlow Serving
	// answers it.
	Labels map[string]int64
	// LoadVersion loads one given version, the versions Labels names,
	// for a model with a Loader; a model with a BaseDir loads them from
	// <BaseDir>/<version>/. Without it, a model with a Loader may only
	// label the version its Loader gives first.
	LoadVersion func(version int64) (Servable, error)
}

// labelRE is what a version label may be: TensorFlow Serving's word
// characters.
var labelRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// addModel checks c and loads its first versions: the newest, and those
// its labels name.
func (s *Server) addModel(c ModelConfig) error {
	if c.Name == "" || strings.ContainsAny(c.Name, "/:") {
		return fmt.Errorf("model name %q: must be non-empty without '/' or ':'", c.Name)
	}
	if _, dup := s.models[c.Name]; dup {
		return fmt.Errorf("model %q is configured twice", c.Name)
	}
	m := &servedModel{name: c.Name, load: c.Loader, loadVersion: c.LoadVersion, labels: maps.Clone(c.Labels), versions: map[int64]*servedVersion{}}
	switch {
	case m.load != nil && (c.BaseDir != "" || c.Model != nil):
		return fmt.Errorf("model %q: has a Loader and a BaseDir or Model; a Loader replaces them, give one or the other", c.Name)
	case m.load == nil && c.BaseDir != "" && c.Model == nil:
		return fmt.Errorf("model %q: needs a BaseDir and a Model, or a Loader: no Model to load %s into (an export holds variables, not the model function: set ModelConfig.Model to the *replicate.Model it was exported from)", c.Name, c.BaseDir)
	case m.load == nil && (c.BaseDir == "" || c.Model == nil):
		return fmt.Errorf("model %q: needs a BaseDir and a Model, or a Loader", c.Name)
	case m.load == nil && m.loadVersion != nil:
		return fmt.Errorf("model %q: has a LoadVersion and a BaseDir; versions load from the BaseDir, give a LoadVersion with a Loader only", c.Name)
	case m.load == nil:
		m.load, m.loadVersion = dirLoader(c, m, s.cfg.Logger), dirVersionLoader(c)
	}
	for _, label := range slices.Sorted(maps.Keys(m.labels)) {
		if !labelRE.MatchString(label) {
			return fmt.Errorf("model %q: label %q: must be letters, digits and underscores", c.Name, label)
		}
		if v := m.labels[label]; v <= 0 {
			return fmt.Errorf("model %q: label %q names version %d: versions are positive integers", c.Name, label, v)
		}
	}
	if err := m.loadFirst(s.cfg.Logger); err != nil {
		for _, v := range m.takeAll() {
			v.s.Close()
		}
		return fmt.Errorf("model %q: %w", c.Name, err)
	}
	s.models[c.Name] = m
	s.names = append(s.names, c.Name)
	for _, v := range slices.Sorted(maps.Keys(m.versions)) {
		s.cfg.Logger.Info("serving model", "model", c.Name, "version", v)
	}
	return nil
}

// loadFirst loads m's newest version and those its labels name. Newer
// versions that failed to load beside the newest that did are logged.
func (m *servedModel) loadFirst(logger *slog.Logger) error {
	sv, err := m.load(0)
	switch {
	case sv == nil && err == nil:
		return export.ErrNoVersion
	case sv == nil:
		return err
	case err != nil:
		logger.Error("newer versions failed to load", "model", m.name, "serving", sv.Version(), "error", err)
	}
	v, err := newServedVersion(sv)
	if err != nil {
		sv.Close()
		return err
	}
	m.replaceLatest(v)
	for _, label := range slices.Sorted(maps.Keys(m.labels)) {
		want := m.labels[label]
		if m.served(want) != nil {
			continue
		}
		if m.loadVersion == nil {
			return fmt.Errorf("label %q names version %d, the Loader gave version %d, and there is no LoadVersion to load another", label, want, v.version)
		}
		sv, err := m.loadVersion(want)
		if err == nil && sv == nil {
			err = fmt.Errorf("%w %d", export.ErrNoVersion, want)
		}
		if err != nil {
			return fmt.Errorf("label %q: %w", label, err)
		}
		lv, err := newServedVersion(sv)
		if err == nil && lv.version != want {
			err = fmt.Errorf("loading version %d gave version %d", want, lv.version)
		}
		if err != nil {
			sv.Close()
			return fmt.Errorf("label %q: %w", label, err)
		}
		m.mu.Lock()
		m.versions[want] = lv
		m.mu.Unlock()
	}
	return nil
}

// closeLoaded closes the versions a failed NewServer loaded.
func (s *Server) closeLoaded() {
	for _, m := range s.models {
		for _, v := range m.takeAll() {
			v.s.Close()
		}
	}
}

// dirLoader loads m's versions from c's base directory: the newest
// version newer than the one served that loads, trying them newest first.
// A version that fails to load is recorded in m (its status shows it),
// and not tried again; the loader returns the version it loaded, if any,
// with the errors of the newer ones that failed. Directories whose names
// are not versions (exportdir.ParseVersion) are ignored, and logged once.
func dirLoader(c ModelConfig, m *servedModel, logger *slog.Logger) func(int64) (Servable, error) {
	var mu sync.Mutex // Reload is serialized, but for the race detector's sake
	logged := map[string]bool{}
	return func(current int64) (Servable, error) {
		vs, ignored, err := exportdir.ScanVersions(c.BaseDir)
		if err != nil {
			return nil, fmt.Errorf("listing the versions of %s: %w", c.BaseDir, err)
		}
		mu.Lock()
		for _, name := range ignored {
			if !logged[name] {
				logged[name] = true
				logger.Warn("ignoring a directory that is not a version: a version is named by a positive integer in canonical decimal, without leading zeros or sign",
					"model", c.Name, "dir", filepath.Join(c.BaseDir, name))
			}
		}
		mu.Unlock()
		var errs []error
		for i := len(vs) - 1; i >= 0 && vs[i] > current; i-- {
			if m.failedToLoad(vs[i]) {
				continue
			}
			p, err := export.Load(filepath.Join(c.BaseDir, strconv.FormatInt(vs[i], 10)), c.Model)
			if err == nil {
				if _, err = newServedVersion(p); err != nil { // signatures the server cannot serve
					p.Close()
				}
			}
			if err != nil {
				m.loadFailed(vs[i], err)
				errs = append(errs, fmt.Errorf("version %d: %w", vs[i], err))
				continue
			}
			return p, errors.Join(errs...)
		}
		if current == 0 && len(errs) == 0 {
			return nil, fmt.Errorf("%w in %s", export.ErrNoVersion, c.BaseDir)
		}
		// Nothing newer (a base directory emptied by mistake keeps the
		// current version), or nothing newer that loads.
		return nil, errors.Join(errs...)
	}
}

// dirVersionLoader loads one version of c's base directory.
func dirVersionLoader(c ModelConfig) func(int64) (Servable, error) {
	return func(version int64) (Servable, error) {
		p, err := export.Load(filepath.Join(c.BaseDir, strconv.FormatInt(version, 10)), c.Model)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}
