package canned

import (
	"errors"
	"fmt"
	"os"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/columns"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/towers"
)

// TestMain runs the tests on package columns' InputLayer and LinearLogits
// once they are implemented; until then on stand-ins of TensorFlow's
// semantics for the columns the tests use (numeric columns, dense, and
// identity columns, sparse), with the variable names columns documents.
func TestMain(m *testing.M) {
	if _, err := columns.InputLayer(nil, nil); errors.Is(err, columns.ErrNotImplemented) {
		inputLayer, linearLogits = standInInputLayer, standInLinearLogits
	}
	os.Exit(m.Run())
}

func standInInputLayer(s *towers.Scope, features model.Features, cols ...columns.Column) (*G.Node, error) {
	var xs []*G.Node
	for _, c := range cols {
		n, ok := c.(*columns.NumericColumn)
		if !ok {
			return nil, fmt.Errorf("stand-in input layer: column %q is a %T, not numeric", c.Name(), c)
		}
		x, err := features.Lookup(n.Name())
		if err != nil {
			return nil, err
		}
		xs = append(xs, x)
	}
	if len(xs) == 1 {
		return xs[0], nil
	}
	return layers.Concat(xs...)
}

func standInLinearLogits(s *towers.Scope, features model.Features, units int, cols ...columns.Column) (*G.Node, error) {
	var sum *G.Node
	add := func(x *G.Node) (err error) {
		if sum == nil {
			sum = x
			return nil
		}
		sum, err = layers.Add(sum, x, layers.Linear)
		return err
	}
	for _, c := range cols {
		name := "linear_model/" + c.Name() + "/weights"
		switch c := c.(type) {
		case *columns.NumericColumn:
			x, err := features.Lookup(c.Name())
			if err != nil {
				return nil, err
			}
			w, err := s.Variable(name, tensor.Float32, tensor.Shape{x.Shape()[1], units}, towers.Zeros())
			if err != nil {
				return nil, err
			}
			y, err := layers.Dense(x, w, nil, layers.Linear)
			if err != nil {
				return nil, err
			}
			if err := add(y); err != nil {
				return nil, err
			}
		case columns.CategoricalColumn:
			ids, err := s.SparseFeature(c.Name())
			if err != nil {
				return nil, err
			}
			w, err := s.Variable(name, tensor.Float32, tensor.Shape{c.NumBuckets(), units}, towers.Zeros())
			if err != nil {
				return nil, err
			}
			y, err := layers.EmbeddingLookupSparse(s, w, ids, layers.CombineSum)
			if err != nil {
				return nil, err
			}
			if err := add(y); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("stand-in linear logits: column %q is a %T", c.Name(), c)
		}
	}
	bias, err := s.Variable("linear_model/bias_weights", tensor.Float32, tensor.Shape{units}, towers.Zeros())
	if err != nil {
		return nil, err
	}
	return G.BroadcastAdd(sum, bias, nil, []byte{0})
}
