package serving

// Listening and stopping: the connections a Server accepts, with its
// timeouts, and Shutdown and Close, which end them and close every
// version whatever the clients do.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ShutdownTimeout is how long Serve and ListenAndServe wait for the
// requests in flight once their context is done, before they close the
// connections still open.
const ShutdownTimeout = 30 * time.Second

// ListenAndServe serves h on the TCP address addr until ctx is done, then
// shuts down gracefully: it stops accepting connections and waits up to
// ShutdownTimeout for the requests in flight, then closes the connections
// left. A *Server is served by its own ListenAndServe, with its Config's
// connection limits and timeouts; any other handler with the default ones
// (DefaultMaxConnections, DefaultReadHeaderTimeout, ...). It returns nil
// after a graceful shutdown.
func ListenAndServe(ctx context.Context, addr string, h http.Handler) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serving: listen: %w", err)
	}
	return Serve(ctx, l, h)
}

// Serve is ListenAndServe on a listener; it closes l.
func Serve(ctx context.Context, l net.Listener, h http.Handler) error {
	if s, ok := h.(*Server); ok {
		return s.Serve(ctx, l)
	}
	cfg, _ := Config{}.withDefaults() // the zero Config is valid
	return serveUntil(ctx, newLimitListener(l, cfg.MaxConnections), newHTTPServer(h, cfg, nil))
}

// ListenAndServe serves the REST API on the TCP address addr, with the
// Config's connection limits and timeouts, until ctx is done or the server
// is shut down or closed; see Serve.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serving: listen: %w", err)
	}
	return s.Serve(ctx, l)
}

// Serve serves the REST API on the connections l accepts, at most
// Config.MaxConnections at once, with the Config's limits and timeouts,
// until ctx is done or the server is shut down or closed; it closes l.
// Once ctx is done it stops accepting, waits up to ShutdownTimeout for the
// requests in flight on its connections, then closes those left; the
// server itself stays open (see Shutdown and Close). Shutdown and Close
// end the connections of every Serve. It returns nil once stopped
// gracefully, by ctx or by Shutdown or Close.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	hs := newHTTPServer(s, s.cfg, s.connState)
	if !s.track(hs) {
		l.Close()
		return errors.New("serving: serve: the server is closed")
	}
	defer s.untrack(hs)
	return serveUntil(ctx, newLimitListener(l, s.cfg.MaxConnections), hs)
}

// newHTTPServer returns an http.Server for h with cfg's timeouts and
// header limit, logging net/http's own errors to cfg.Logger.
func newHTTPServer(h http.Handler, cfg Config, connState func(net.Conn, http.ConnState)) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ConnState:         connState,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
}

// serveUntil serves hs on l until ctx is done, then shuts it down
// gracefully, for at most ShutdownTimeout.
func serveUntil(ctx context.Context, l net.Listener, hs *http.Server) error {
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil // by the Server's Shutdown or Close
		}
		return fmt.Errorf("serving: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	<-errc // http.ErrServerClosed, at once
	if err != nil {
		hs.Close()
		return fmt.Errorf("serving: shutdown: connections still busy after %v were closed: %w", ShutdownTimeout, err)
	}
	return nil
}

// track registers an http.Server of Serve, to be stopped with the
// server; it returns false once the server is stopping.
func (s *Server) track(hs *http.Server) bool {
	s.httpMu.Lock()
	defer s.httpMu.Unlock()
	if s.httpStopped {
		return false
	}
	s.https[hs] = struct{}{}
	return true
}

func (s *Server) untrack(hs *http.Server) {
	s.httpMu.Lock()
	defer s.httpMu.Unlock()
	delete(s.https, hs)
}

// Shutdown stops the server gracefully, within ctx: the listeners of
// Serve stop accepting, and the requests in flight finish and are
// answered while ctx lasts; then requests get 503 Service Unavailable,
// the batches waiting run, and every version is closed once its last
// request is done. When ctx is done first, the connections still open are
// closed (their requests' contexts are cancelled), and Shutdown returns
// an error wrapping ctx's; a version still running a request is then
// closed when that request ends. Otherwise it returns the versions' Close
// errors. Calls after the first return nil.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.stop(ctx, true)
}

// Close stops the server at once: it closes the listeners and connections
// of Serve (answers being written are cut off; requests' contexts are
// cancelled), answers later requests with 503 Service Unavailable, runs
// the batches waiting, waits for the model runs in progress and closes
// every version. It does not wait for clients. It returns the versions'
// Close errors; calls after the first return nil.
func (s *Server) Close() error {
	return s.stop(context.Background(), false)
}

// stop is Shutdown (graceful) and Close.
func (s *Server) stop(ctx context.Context, graceful bool) error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.stopping {
		return nil
	}
	s.stopping = true
	var errs []error
	if err := s.stopConnections(ctx, graceful); err != nil {
		errs = append(errs, err)
	}
	s.closed.Store(true)
	close(s.done)
	if s.batcher != nil {
		s.batcher.close()
	}
	if err := s.closeVersions(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// stopConnections stops the http.Servers of Serve: gracefully until ctx
// is done, or at once.
func (s *Server) stopConnections(ctx context.Context, graceful bool) error {
	s.httpMu.Lock()
	s.httpStopped = true
	servers := slices.Collect(maps.Keys(s.https))
	s.httpMu.Unlock()
	var forced atomic.Bool
	var wg sync.WaitGroup
	for _, hs := range servers {
		wg.Go(func() {
			if graceful {
				if err := hs.Shutdown(ctx); err == nil {
					return
				}
				forced.Store(true)
			}
			hs.Close()
		})
	}
	wg.Wait()
	if forced.Load() {
		return fmt.Errorf("serving: shutdown: the connections still busy were closed: %w", context.Cause(ctx))
	}
	return nil
}

// closeVersions takes every version out of service and closes each once
// its last request is done, waiting for them (and for the versions
// replaced earlier) until ctx is done.
func (s *Server) closeVersions(ctx context.Context) error {
	type closing struct {
		name string
		v    *servedVersion
	}
	var all []closing
	for _, name := range s.names {
		for _, v := range s.models[name].takeAll() {
			all = append(all, closing{name, v})
		}
	}
	errc := make(chan error, len(all))
	for _, c := range all {
		go func() {
			c.v.refs.Wait()
			if err := c.v.s.Close(); err != nil {
				errc <- fmt.Errorf("serving: close model %q version %d: %w", c.name, c.v.version, err)
				return
			}
			errc <- nil
		}()
	}
	drained := make(chan struct{})
	go func() {
		s.drains.Wait()
		close(drained)
	}()
	var errs []error
	for left := len(all); left > 0 || drained != nil; {
		select {
		case err := <-errc:
			left--
			if err != nil {
				errs = append(errs, err)
			}
		case <-drained:
			drained = nil
		case <-ctx.Done():
			go s.logLate(errc, left)
			errs = append(errs, fmt.Errorf("serving: shutdown: versions still running requests are closed when those end: %w", context.Cause(ctx)))
			return errors.Join(errs...)
		}
	}
	return errors.Join(errs...)
}

// logLate logs the Close errors of the last n versions, closed after
// Shutdown returned.
func (s *Server) logLate(errc <-chan error, n int) {
	for range n {
		if err := <-errc; err != nil {
			s.cfg.Logger.Error("closing a model version after shutdown", "error", err)
		}
	}
}
