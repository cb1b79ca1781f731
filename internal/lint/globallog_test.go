package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// globalLoggers are the package-level functions that write to the
// process's loggers or standard streams, by import path.
var globalLoggers = map[string]map[string]bool{
	"log/slog": {"Default": true, "Debug": true, "Info": true, "Warn": true, "Error": true, "Log": true, "LogAttrs": true,
		"DebugContext": true, "InfoContext": true, "WarnContext": true, "ErrorContext": true, "SetDefault": true},
	"log": {"Print": true, "Printf": true, "Println": true, "Fatal": true, "Fatalf": true, "Fatalln": true,
		"Panic": true, "Panicf": true, "Panicln": true, "Default": true, "Writer": true, "SetOutput": true},
	"fmt": {"Print": true, "Printf": true, "Println": true},
}

// globalLogCalls returns "file:line: pkg.Func" for every call of a global
// logger in the Go source src.
func globalLogCalls(t *testing.T, name string, src []byte) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	imports := map[string]string{} // local name -> import path
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		local := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			local = im.Name.Name
		}
		imports[local] = path
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && globalLoggers[imports[id.Name]][sel.Sel.Name] {
			out = append(out, fset.Position(sel.Pos()).String()+": "+imports[id.Name]+"."+sel.Sel.Name)
		}
		return true
	})
	return out
}

// TestLibraryUsesNoGlobalLogger: the library logs only through the logger
// its caller gives it; no library file (commands, examples, benchmarks and
// tests aside) calls slog's or log's package-level loggers, or prints to
// standard output.
func TestLibraryUsesNoGlobalLogger(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch top := strings.Split(rel, string(filepath.Separator))[0]; {
			case strings.HasPrefix(d.Name(), ".") && rel != ".", d.Name() == "testdata", top == "cmd", top == "examples", top == "bench":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		found = append(found, globalLogCalls(t, rel, src)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("read %d library files under %s; the walk missed the module", files, root)
	}
	if diff := cmp.Diff([]string(nil), found); diff != "" {
		t.Errorf("library code calls global loggers (-want +got):\n%s", diff)
	}
}

// TestGlobalLogCalls: the check sees each way a file can reach a global
// logger, renamed imports included, and nothing else.
func TestGlobalLogCalls(t *testing.T) {
	src := `package p

import (
	"fmt"
	stdlog "log"
	"log/slog"
)

func f(l *slog.Logger) {
	slog.Info("a")
	stdlog.Printf("b")
	fmt.Println("c")
	_ = slog.Default()
	l.Info("fine")
	_ = fmt.Sprintf("fine")
}
`
	want := []string{"p.go:10:2: log/slog.Info", "p.go:11:2: log.Printf", "p.go:12:2: fmt.Println", "p.go:13:6: log/slog.Default"}
	if diff := cmp.Diff(want, globalLogCalls(t, "p.go", []byte(src))); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
