package main

// The server side: the linear example exported untrained and served until
// the process is told to stop.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/serving"
	"github.com/towerflow/towerflow/towers"
)

// runServer exports the linear model to a temporary directory, serves it
// on addr as model "linear", prints "listening <addr>" on standard output
// once it accepts connections, and serves until ctx is done.
func runServer(ctx context.Context, addr string, maxBody int64) error {
	tmp, err := os.MkdirTemp("", "serveload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mdl := replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0)}})
	est, err := estimator.New(mdl, estimator.RunConfig{LogEvery: -1, Logger: logger})
	if err != nil {
		return err
	}
	base := filepath.Join(tmp, "linear")
	if _, err := est.Export(ctx, base, estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{1}}}, estimator.AllowUntrained()); err != nil {
		est.Close()
		return err
	}
	est.Close()
	srv, err := serving.NewServer([]serving.ModelConfig{{Name: "linear", BaseDir: base, Model: mdl}},
		serving.Config{MaxBodyBytes: maxBody, Logger: logger})
	if err != nil {
		return err
	}
	defer srv.Close()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Printf("listening %s\n", l.Addr())
	return srv.Serve(ctx, l)
}
