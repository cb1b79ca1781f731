package model

import (
	"fmt"
	"maps"
	"slices"

	G "gorgonia.org/gorgonia"
)

// Features are the input nodes of a tower's features, keyed like the
// batch. Indexing a name the batch lacks gives nil, as for any map; Get
// names the missing feature instead.
type Features map[string]*G.Node

// Labels are the input nodes of a tower's labels, keyed like the batch;
// nil in Predict mode. Get names a missing label.
type Labels map[string]*G.Node

// Get returns the feature called name. A name the batch does not have
// panics with a *MissingInputError naming it and the features there are;
// inside a model function the engine returns that as the build's error,
// naming the tower. Lookup returns the error instead.
func (f Features) Get(name string) *G.Node { return must(f.Lookup(name)) }

// Lookup returns the feature called name, or a *MissingInputError.
func (f Features) Lookup(name string) (*G.Node, error) { return lookup("feature", f, name) }

// Get returns the label called name. A name the batch does not have (every
// name in Predict mode) panics with a *MissingInputError naming it and the
// labels there are; inside a model function the engine returns that as the
// build's error, naming the tower. Lookup returns the error instead.
func (l Labels) Get(name string) *G.Node { return must(l.Lookup(name)) }

// Lookup returns the label called name, or a *MissingInputError.
func (l Labels) Lookup(name string) (*G.Node, error) { return lookup("label", l, name) }

// MissingInputError is a feature or label a model function asked for that
// the batch does not have.
type MissingInputError struct {
	Kind string   // "feature" or "label"
	Name string   // the name asked for
	Have []string // the names the batch has, sorted
}

func (e *MissingInputError) Error() string {
	if len(e.Have) == 0 {
		return fmt.Sprintf("%s %q is not in the batch, which has no %ss", e.Kind, e.Name, e.Kind)
	}
	return fmt.Sprintf("%s %q is not in the batch, which has %ss %q", e.Kind, e.Name, e.Kind, e.Have)
}

func lookup(kind string, m map[string]*G.Node, name string) (*G.Node, error) {
	if n := m[name]; n != nil {
		return n, nil
	}
	return nil, &MissingInputError{Kind: kind, Name: name, Have: slices.Sorted(maps.Keys(m))}
}

func must(n *G.Node, err error) *G.Node {
	if err != nil {
		panic(err)
	}
	return n
}
