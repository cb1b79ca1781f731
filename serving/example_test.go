package serving_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/serving"
	"github.com/towerflow/towerflow/towers"
)

func ExampleNewServer() {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "towerflow-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)

	// Train the linear model and export it under a base directory, as
	// version 1.
	model := replicate.ModelFn(linreg.Model,
		replicate.Config{Devices: []towers.Device{towers.CPU(0)}, Optimizer: optimizers.SGD(0.5), Reduction: replicate.BatchMean})
	est, err := estimator.New(model, estimator.RunConfig{Seed: 1, LogEvery: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer est.Close()
	features, labels := linreg.Data(1000, 1)
	train, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 100, Epochs: estimator.Forever, Shuffle: true, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	if err := est.Train(ctx, train, estimator.MaxSteps(400)); err != nil {
		log.Fatal(err)
	}
	base := filepath.Join(tmp, "linear")
	if _, err := est.Export(ctx, base, estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{1}}}); err != nil {
		log.Fatal(err)
	}

	// Serve the newest version of the base directory as model "linear".
	// The zero Config: 16 MiB bodies, no batching, no logging.
	srv, err := serving.NewServer([]serving.ModelConfig{{Name: "linear", BaseDir: base, Model: model}}, serving.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv) // or serving.ListenAndServe(ctx, "localhost:8501", srv)
	defer hs.Close()

	get := func(path string) string {
		res, err := http.Get(hs.URL + path)
		if err != nil {
			log.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	fmt.Println(get("/v1/models/linear"))

	res, err := http.Post(hs.URL+"/v1/models/linear:predict", "application/json", strings.NewReader(`{"instances": [[0], [1], [2]]}`))
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	var out struct{ Predictions [][]float64 }
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d %.3f\n", res.StatusCode, out.Predictions)
	// Output:
	// {"model_version_status":[{"version":"1","state":"AVAILABLE","status":{"error_code":"OK","error_message":""}}]}
	// 200 [[0.300] [0.400] [0.500]]
}
