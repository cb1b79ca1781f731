package towers_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPlumbingNotPublic: the plumbing of the tower runtime, the engine and
// the layers (registering lookups, sparse features and the shard's row
// offset; reading the updates and groups) is not part of package towers' API: model code cannot call it
// (internal/scopes can).
func TestPlumbingNotPublic(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var exported []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				typ := fd.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					name = id.Name + "." + name
				}
			}
			exported = append(exported, name)
		}
	}
	plumbing := []string{"Scope.AddLookup", "Scope.Lookups", "Scope.VariableName", "Scope.SetRowOffset", "Scope.RowOffset",
		"Scope.AddSparseFeature", "NewSparseFeature", "SparseFeature.Set", "Scope.Updates", "Scope.Groups"}
	var public []string
	for _, p := range plumbing {
		if slices.Contains(exported, p) {
			public = append(public, p)
		}
	}
	if diff := cmp.Diff([]string(nil), public); diff != "" {
		t.Errorf("plumbing in the public API (-want +got):\n%s", diff)
	}
	for _, user := range []string{"Scope.Assign", "Scope.AssignAdd", "Scope.Group", "Scope.SparseFeature", "Scope.SparseFeatures", "Scope.Variable", "Scope.VariableNames", "Scope.VariableNode", "SparseFeature.Value", "SparseFeature.Offset"} {
		if !slices.Contains(exported, user) {
			t.Errorf("%s is not exported: model code needs it", user)
		}
	}
}
