package ring_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestTypedAtomicsOnly enforces, for this package, the project rule that
// shared words are typed atomics (atomic.Uint64 and friends), never the
// function forms on plain fields: a typed atomic cannot be read or written
// non-atomically by mistake and is 64-bit aligned on 32-bit platforms.
func TestTypedAtomicsOnly(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	functionPrefixes := []string{"Load", "Store", "Add", "Swap", "CompareAndSwap", "And", "Or"}
	fileSet := token.NewFileSet()
	for _, file := range files {
		syntax, err := parser.ParseFile(fileSet, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(syntax, func(node ast.Node) bool {
			selector, ok := node.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := selector.X.(*ast.Ident); !ok || pkg.Name != "atomic" {
				return true
			}
			for _, prefix := range functionPrefixes {
				if strings.HasPrefix(selector.Sel.Name, prefix) {
					t.Errorf("%s: atomic.%s: use a typed atomic instead",
						fileSet.Position(selector.Pos()), selector.Sel.Name)
				}
			}
			return true
		})
	}
}
