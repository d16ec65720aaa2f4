package docs_test

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/pace-platform/pace/"

// goPackage is what the architecture rules read of `go list -json`.
type goPackage struct {
	ImportPath string
	Imports    []string
}

// listPackages lists the module's packages (nested modules are their own)
// with their imports (tests' not), paths relative to the module.
func listPackages(t *testing.T) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []goPackage
	for dec := json.NewDecoder(strings.NewReader(string(out))); ; {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		p.ImportPath = strings.TrimPrefix(p.ImportPath, module)
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages, want the whole module", len(pkgs))
	}
	return pkgs
}

// under reports whether path is dir or inside it.
func under(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

// stageOf is the stage a package belongs to ("manager" for
// stages/manager/...), or "".
func stageOf(path string) string {
	rest, ok := strings.CutPrefix(path, "stages/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}

// TestImportRules checks the claims of architecture.md's "Packages" against
// the import graph of the code (a test may start a neighbour to test a
// handoff): stages talk over subjects, never by importing each other;
// schemas, flowcontrol and the internal packages know nothing of NATS or of
// the bus; the bus knows no stage; nothing imports cmd.
func TestImportRules(t *testing.T) {
	pkgs := listPackages(t)
	own := map[string]bool{}
	for _, p := range pkgs {
		own[p.ImportPath] = true
	}
	nats := func(imp string) bool { return strings.HasPrefix(imp, "github.com/nats-io/") }
	// Rules name packages of the module by their path in it; an import of
	// the module is trimmed likewise, others are whole.
	rules := []struct {
		name   string
		from   func(pkg string) bool
		denied func(pkg, imp string) bool
	}{
		{"a stage imports another stage", func(p string) bool { return stageOf(p) != "" },
			func(p, imp string) bool { return stageOf(imp) != "" && stageOf(imp) != stageOf(p) }},
		{"schemas imports NATS or more of Pace", func(p string) bool { return under(p, "schemas") },
			func(_, imp string) bool {
				return nats(imp) || own[imp] && !under(imp, "schemas")
			}},
		{"flowcontrol imports NATS, the bus or a stage", func(p string) bool { return under(p, "flowcontrol") },
			func(_, imp string) bool { return nats(imp) || under(imp, "bus") || stageOf(imp) != "" }},
		{"the consume harness imports more of Pace", func(p string) bool { return under(p, "bus/consume") },
			func(_, imp string) bool { return own[imp] }},
		{"the bus imports a stage", func(p string) bool { return under(p, "bus") },
			func(_, imp string) bool { return stageOf(imp) != "" }},
		{"an internal package imports the bus or a stage", func(p string) bool { return under(p, "internal") && !under(p, "internal/host") },
			func(_, imp string) bool { return nats(imp) || under(imp, "bus") || stageOf(imp) != "" }},
		// The stage host hands each stage its bus connection, and knows no more of NATS.
		{"the stage host imports NATS or a stage", func(p string) bool { return under(p, "internal/host") },
			func(_, imp string) bool { return nats(imp) || stageOf(imp) != "" || strings.HasPrefix(imp, "bus/") }},
		{"a package imports cmd", func(p string) bool { return !under(p, "cmd") },
			func(_, imp string) bool { return under(imp, "cmd") }},
	}
	for _, p := range pkgs {
		for _, r := range rules {
			if !r.from(p.ImportPath) {
				continue
			}
			for _, imp := range p.Imports {
				if r.denied(p.ImportPath, strings.TrimPrefix(imp, module)) {
					t.Errorf("%s: %s imports %s", r.name, p.ImportPath, imp)
				}
			}
		}
	}
}

// TestLayout: the module's top level is the design's (DESIGN.md's layout,
// architecture.md's packages), and nothing else.
func TestLayout(t *testing.T) {
	want := []string{"bus", "cmd", "deploy", "docs", "examples", "flowcontrol", "integration", "internal", "schemas", "stages"}
	entries, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			got = append(got, e.Name())
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("top-level folders = %v, want %v", got, want)
	}
}

// TestStagesHaveOneShape: every stage package (a folder of stages/) has
// New(deps Deps, cfg Config, opts ...Option) (*Stage, error) and
// (*Stage).Run(ctx context.Context) error, as architecture.md says.
func TestStagesHaveOneShape(t *testing.T) {
	const newShape, runShape = "func(Deps, Config, ...Option) (*Stage, error)", "func(context.Context) error"
	dirs, err := os.ReadDir("../stages")
	if err != nil {
		t.Fatal(err)
	}
	stages := 0
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		stages++
		files, err := filepath.Glob(filepath.Join("../stages", d.Name(), "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				switch {
				case !ok:
				case fn.Name.Name == "New" && fn.Recv == nil:
					got["New"] = signature(fn.Type)
				case fn.Name.Name == "Run" && fn.Recv != nil && typeString(fn.Recv.List[0].Type) == "*Stage":
					got["Run"] = signature(fn.Type)
				}
			}
		}
		if got["New"] != newShape {
			t.Errorf("stages/%s: New is %q, want %q", d.Name(), got["New"], newShape)
		}
		if got["Run"] != runShape {
			t.Errorf("stages/%s: (*Stage).Run is %q, want %q", d.Name(), got["Run"], runShape)
		}
	}
	if stages < 8 {
		t.Errorf("found %d stages, want the 8 of architecture.md", stages)
	}
}

// signature writes a function type with its parameters' types alone.
func signature(ft *ast.FuncType) string {
	list := func(fl *ast.FieldList) []string {
		var out []string
		if fl == nil {
			return out
		}
		for _, f := range fl.List {
			for range max(1, len(f.Names)) {
				out = append(out, typeString(f.Type))
			}
		}
		return out
	}
	sig := "func(" + strings.Join(list(ft.Params), ", ") + ")"
	switch res := list(ft.Results); len(res) {
	case 0:
	case 1:
		sig += " " + res[0]
	default:
		sig += " (" + strings.Join(res, ", ") + ")"
	}
	return sig
}

// typeString writes the types a stage's New and Run use.
func typeString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return "*" + typeString(e.X)
	case *ast.SelectorExpr:
		return typeString(e.X) + "." + e.Sel.Name
	case *ast.Ellipsis:
		return "..." + typeString(e.Elt)
	default:
		return "?"
	}
}

// TestOnlyTheHarnessReadsConsumers: outside bus/consume, no code of the
// module takes messages from a JetStream consumer itself (Fetch,
// FetchNoWait, FetchBytes, Consume, Messages) or watches a key-value bucket
// (WatchAll, WatchFiltered, and Watch on a bucket, which the code names kv):
// every loop reads through the harness, as architecture.md says. Tests may
// (they play strangers' clients).
func TestOnlyTheHarnessReadsConsumers(t *testing.T) {
	reads := map[string]bool{"Fetch": true, "FetchNoWait": true, "FetchBytes": true, "Consume": true, "Messages": true,
		"WatchAll": true, "WatchFiltered": true}
	bucket := func(x ast.Expr) bool {
		switch x := x.(type) {
		case *ast.Ident:
			return x.Name == "kv"
		case *ast.SelectorExpr:
			return x.Sel.Name == "kv"
		}
		return false
	}
	files := 0
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			_, nested := os.Stat(filepath.Join(path, "go.mod"))
			if path != ".." && (nested == nil || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") ||
				filepath.ToSlash(path) == "../bus/consume") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !reads[sel.Sel.Name] && (sel.Sel.Name != "Watch" || !bucket(sel.X)) {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "consume" {
				return true
			}
			t.Errorf("%s: %s reads JetStream itself; read through bus/consume", strings.TrimPrefix(path, "../"), sel.Sel.Name)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d files, want the whole module", files)
	}
}
