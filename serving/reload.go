package serving

// Reloading: new versions swapped in while serving, and the versions they
// replace closed once their last request is done.

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Reload looks for a new version of every model (the newest in its base
// directory, or what its Loader returns) and swaps it in atomically:
// requests that started before finish on the old version, which is closed
// once the last of them is done (in the background; Close waits for it),
// unless a label names it. A version replaced is listed by the model
// status API with state UNLOADING, then END once closed. A version that
// fails to load never blocks the others: from a base directory, the
// newest version that loads is served, and each one that failed is listed
// by the status API as END with its error, logged, and not tried again
// (TensorFlow Serving too keeps serving the last good version). A model
// with nothing newer that loads stays on its current version. The errors
// are joined.
func (s *Server) Reload() error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.closed.Load() {
		return errors.New("serving: reload: the server is closed")
	}
	var errs []error
	for _, name := range s.names {
		if err := s.reloadModel(s.models[name]); err != nil {
			errs = append(errs, fmt.Errorf("serving: reload model %q: %w", name, err))
		}
	}
	for _, err := range errs {
		s.cfg.Logger.Error("reload", "error", err)
	}
	return errors.Join(errs...)
}

// reloadModel swaps in m's new version, if it has one, and retires the
// version it replaces.
func (s *Server) reloadModel(m *servedModel) error {
	cur := m.latestVersion()
	sv, failed := m.load(cur) // failed: newer versions that did not load
	if sv == nil {
		return failed
	}
	v, err := newServedVersion(sv)
	if err == nil && v.version == cur {
		err = fmt.Errorf("the loader returned version %d, the one served", cur)
	}
	if err != nil {
		sv.Close()
		return err
	}
	if served := m.served(v.version); served != nil {
		// A version a label keeps: serve that one as the newest.
		if err := sv.Close(); err != nil {
			s.cfg.Logger.Error("closing a version loaded twice", "model", m.name, "version", v.version, "error", err)
		}
		v = served
	}
	old, retired := m.replaceLatest(v)
	s.cfg.Logger.Info("serving model", "model", m.name, "version", v.version, "previous", cur)
	if old != nil {
		s.retire(m.name, old, retired)
	}
	return failed
}

// retire closes a version no longer served in the background, once its
// last request is done.
func (s *Server) retire(name string, old *servedVersion, r *retiredVersion) {
	s.drains.Add(1)
	go func() {
		defer s.drains.Done()
		old.refs.Wait()
		err := old.s.Close()
		r.finish(err)
		if err != nil {
			s.cfg.Logger.Error("closing a replaced model version", "model", name, "version", old.version, "error", err)
		}
	}()
}

// Watch calls Reload every interval until ctx is done or the server is
// closed; it logs reload errors and keeps serving the current versions.
func (s *Server) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case <-t.C:
			_ = s.Reload() // logged
		}
	}
}
