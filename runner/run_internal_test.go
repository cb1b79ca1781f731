package runner

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/wanterr"
)

// TestRunServeAddress: an address -serve cannot listen on is an error
// before the training, which does not run.
func TestRunServeAddress(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name, addr string
		says       []string
	}{
		{"no port", "localhost", []string{"-serve localhost:", "missing port"}},
		{"a port out of range", "localhost:99999", []string{"-serve localhost:99999:", "invalid port"}},
		{"a port in use", busy.Addr().String(), []string{"-serve " + busy.Addr().String() + ":", "address already in use"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trained := false
			err := run(Flags{ModelDir: t.TempDir(), Serve: tc.addr}, func(context.Context) error { trained = true; return nil }, Serving{})
			wanterr.Mentions(t, err, tc.says...)
			if diff := cmp.Diff(false, trained); diff != "" {
				t.Errorf("trained (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunServeListensFirst: the address is listened on while the training
// runs (a client connects), and free again once run returns (here the
// training fails, so nothing is served).
func TestRunServeListensFirst(t *testing.T) {
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	free.Close()
	failed := errors.New("training failed")
	var dialErr error
	err = run(Flags{ModelDir: t.TempDir(), Serve: addr}, func(context.Context) error {
		var c net.Conn
		if c, dialErr = net.Dial("tcp", addr); dialErr == nil {
			c.Close()
		}
		return failed
	}, Serving{})
	if !errors.Is(err, failed) {
		t.Errorf("run = %v, want the training's error", err)
	}
	if dialErr != nil {
		t.Errorf("dialling the address during the training: %v", dialErr)
	}
	again, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the address after run: %v", err)
	}
	again.Close()
}
