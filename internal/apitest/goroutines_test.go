package apitest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// This guard lives in apitest because the rule it keeps is the harness's
// contract (async.go: only the test goroutine may end a test), and because
// most of the helpers it must know to fail the test are apitest's own, which
// it reads from the source beside it rather than from a list to keep current.

// TestNoFailNowOffTheTestGoroutine parses every test file of the module and
// every test-helper package (a non-test file importing "testing"), and fails
// on a function run on another goroutine (a go statement, a WaitGroup's or
// errgroup's Go, time.AfterFunc, an HTTP handler literal) that calls t.Fatal,
// t.Fatalf, t.FailNow, t.Skip, t.Skipf, t.SkipNow or testify's require, or a
// helper that can: one of its package or of a test-helper package that does
// so itself or through another such helper, found by name. FailNow from any
// goroutine but the test's ends only that goroutine: the test hangs waiting
// for it, or passes with the assertion unmade.
func TestNoFailNowOffTheTestGoroutine(t *testing.T) {
	t.Parallel()
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("module root: %v", err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^module\s+(\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod names no module")
	}
	fset := token.NewFileSet()
	files := map[string][]*ast.File{} // by import path
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if !strings.HasSuffix(p, "_test.go") && !slices.ContainsFunc(f.Imports, func(im *ast.ImportSpec) bool {
			return im.Path.Value == `"testing"`
		}) {
			return nil // code no test runs on its goroutine
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		importPath := path.Join(string(m[1]), filepath.ToSlash(rel))
		files[importPath] = append(files[importPath], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	problems := checkGoroutines(fset, files)
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Log("report from the goroutine through a channel (apitest.DoAsync, apitest.Outcome, TryDo) and assert on the test goroutine, or use t.Errorf and return")
	}
}

// TestNoFailNowCheckerFinds feeds the checker small packages with the
// mistakes it must find and the patterns it must let through.
func TestNoFailNowCheckerFinds(t *testing.T) {
	t.Parallel()
	const helper = `package apitest
import "testing"
type Env struct{ T testing.TB }
type Response struct{}
func (e *Env) Do() *Response { e.T.Helper(); return e.must() }
func (e *Env) must() *Response { e.T.Fatalf("no"); return nil }
func (e *Env) TryDo() (*Response, error) { return nil, nil }
func Wait(t testing.TB) { t.Fatal("late") }
`
	for _, c := range []struct {
		name, body string
		want       []string // calls reported, in order
	}{
		{"DirectFatal", `go func() { t.Fatal("x") }()`, []string{"t.Fatal"}},
		{"FailNowThroughSelector", `go func() { s.t.FailNow() }()`, []string{"s.t.FailNow"}},
		{"SkipInWaitGroupGo", `var wg sync.WaitGroup; wg.Go(func() { t.Skip() })`, []string{"t.Skip"}},
		{"AfterFunc", `time.AfterFunc(0, func() { t.Fatalf("x") })`, []string{"t.Fatalf"}},
		{"HandlerFunc", `_ = http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.FailNow() })`, []string{"t.FailNow"}},
		{"Require", `go func() { require.NoError(t, nil) }()`, []string{"require.NoError"}},
		{"HelperMethodThroughAnEnv", `e := &apitest.Env{}; go func() { _ = e.Do() }()`, []string{"e.Do"}},
		{"HelperFunc", `go func() { apitest.Wait(t) }()`, []string{"apitest.Wait"}},
		{"LocalHelper", `go func() { wantOK(t) }()`, []string{"wantOK"}},
		{"LocalHelperTwoDeep", `go func() { wantBoth(t) }()`, []string{"wantBoth"}},
		{"LocalMethod", `var s suite; go func() { s.check() }()`, []string{"s.check"}},
		{"AliasOfAHelperMethod", `e := &apitest.Env{}; go func() { _ = do(e) }()`, []string{"do"}},
		{"ClosureVariable", `fail := func() { t.Fatal() }; go func() { fail() }()`, []string{"fail"}},
		{"ClosureInAMap", `do := map[string]func(){"a": func() { t.Fatal() }}; go func() { do["a"]() }()`, []string{`do["a"]`}},
		{"NamedFunctionStarted", `go wantOK(t)`, []string{"wantOK"}},
		{"NestedLiteral", `go func() { defer func() { t.Fatal() }() }()`, []string{"t.Fatal"}},

		{"ErrorIsAllowed", `go func() { t.Errorf("x"); t.Error(); t.Log() }()`, nil},
		{"TryDoIsAllowed", `e := &apitest.Env{}; go func() { _, _ = e.TryDo() }()`, nil},
		{"PackageLevelVarMethods", `go func() { _, _ = http.DefaultClient.Do(nil); log.Fatal() }()`, nil},
		{"WaitGroupWaitIsNotApitestWait", `var wg sync.WaitGroup; go func() { wg.Wait() }()`, nil},
		{"OnTheTestGoroutine", `t.Fatal(); wantOK(t); apitest.Wait(t)`, nil},
		{"GoroutineInsideAHelperIsItsOwn", `go func() { startsOne(t) }()`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			src := `package x_test
import (
	"log"
	"net/http"
	"sync"
	"testing"
	"time"

	"example.com/m/internal/apitest"
	"github.com/stretchr/testify/require"
)
var (
	_ = log.Print
	_ = http.Get
	_ sync.Mutex
	_ = time.Now
	_ = require.NoError
	do = (*apitest.Env).Do
)
type suite struct{ t *testing.T }
func (s suite) check() { s.t.Fatal() }
func wantOK(t *testing.T) { t.Helper(); t.Fatalf("not ok") }
func wantBoth(t *testing.T) { wantOK(t) }
func startsOne(t *testing.T) { go func() { t.Error() }() }
func TestX(t *testing.T) {
	` + c.body + `
}
`
			fset := token.NewFileSet()
			files := map[string][]*ast.File{}
			for p, s := range map[string]string{"example.com/m/internal/apitest/apitest.go": helper, "example.com/m/x/x_test.go": src} {
				f, err := parser.ParseFile(fset, p, s, parser.SkipObjectResolution)
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				files[path.Dir(p)] = append(files[path.Dir(p)], f)
			}
			var got []string
			for _, p := range checkGoroutines(fset, files) {
				_, call, _ := strings.Cut(p, ": ")
				call, _, _ = strings.Cut(call, " ")
				got = append(got, call)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("reported %q, want %q", got, c.want)
			}
		})
	}
}

// failNow are the testing.TB methods that end the calling goroutine.
var failNow = map[string]bool{"Fatal": true, "Fatalf": true, "FailNow": true, "Skip": true, "Skipf": true, "SkipNow": true}

const requirePath = "github.com/stretchr/testify/require"

// goPackage is one package directory's parsed files (test files included)
// and what the checker has learnt of it.
type goPackage struct {
	files []*ast.File
	// helper: a non-test file imports "testing", so its functions may fail
	// the tests of other packages.
	helper bool
	// defs are the bodies of its functions (by name), methods (by name,
	// whatever the receiver) and function-valued variables.
	funcDefs, methodDefs map[string][]def
	// failing are the names of those that can call FailNow.
	failingFuncs, failingMethods map[string]bool
	// imports are the import paths of its files.
	imports map[string]bool
}

type def struct {
	file *ast.File
	node ast.Node // a body, a function literal, or the expression a variable aliases
}

// checkGoroutines returns one line per call that can FailNow from a function
// run on another goroutine, in files keyed by import path.
func checkGoroutines(fset *token.FileSet, files map[string][]*ast.File) []string {
	pkgs := map[string]*goPackage{}
	for importPath, pkgFiles := range files {
		p := &goPackage{files: pkgFiles, funcDefs: map[string][]def{}, methodDefs: map[string][]def{},
			failingFuncs: map[string]bool{}, failingMethods: map[string]bool{}, imports: map[string]bool{}}
		for _, f := range pkgFiles {
			test := strings.HasSuffix(fset.Position(f.Package).Filename, "_test.go")
			for _, im := range f.Imports {
				ip, _ := strconv.Unquote(im.Path.Value)
				p.imports[ip] = true
				p.helper = p.helper || (ip == "testing" && !test)
			}
			p.collectDefs(f)
		}
		pkgs[importPath] = p
	}
	c := &checker{pkgs: pkgs}
	// Helpers call helpers, across packages: learn until nothing changes.
	for changed := true; changed; {
		changed = false
		for _, p := range pkgs {
			changed = c.learn(p, p.funcDefs, p.failingFuncs) || changed
			changed = c.learn(p, p.methodDefs, p.failingMethods) || changed
		}
	}
	var problems []string
	report := func(call *ast.CallExpr, what string) {
		problems = append(problems, fset.Position(call.Pos()).String()+": "+types.ExprString(call.Fun)+" "+what)
	}
	for _, importPath := range slices.Sorted(maps.Keys(pkgs)) {
		p := pkgs[importPath]
		for _, f := range p.files {
			inspectBody := func(body ast.Node) {
				c.inspectCalls(p, f, body, func(call *ast.CallExpr) {
					report(call, "runs on another goroutine and can call FailNow")
				})
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					if lit, ok := ast.Unparen(n.Call.Fun).(*ast.FuncLit); ok {
						inspectBody(lit.Body)
					} else if c.callFails(p, f, n.Call) {
						report(n.Call, "is started on another goroutine and can call FailNow")
					}
				case *ast.CallExpr:
					if body := goroutineLiteral(f, n); body != nil {
						inspectBody(body)
					}
				}
				return true
			})
		}
	}
	return problems
}

// goroutineLiteral returns the body of the function literal call hands to
// another goroutine: wg.Go(func), g.Go(func), time.AfterFunc(d, func),
// http.HandlerFunc(func), mux.HandleFunc(pattern, func).
func goroutineLiteral(f *ast.File, call *ast.CallExpr) ast.Node {
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	pkg, _ := importOf(f, sel.X)
	if !(sel.Sel.Name == "Go" ||
		(pkg == "time" && sel.Sel.Name == "AfterFunc") ||
		(pkg == "net/http" && sel.Sel.Name == "HandlerFunc") ||
		sel.Sel.Name == "HandleFunc") {
		return nil
	}
	for _, a := range call.Args {
		if lit, ok := ast.Unparen(a).(*ast.FuncLit); ok {
			return lit.Body
		}
	}
	return nil
}

func (p *goPackage) collectDefs(f *ast.File) {
	var alias func(name *ast.Ident, value ast.Expr)
	alias = func(name *ast.Ident, value ast.Expr) {
		switch value := ast.Unparen(value).(type) {
		case *ast.FuncLit, *ast.Ident, *ast.SelectorExpr:
			p.funcDefs[name.Name] = append(p.funcDefs[name.Name], def{f, value})
		case *ast.CompositeLit: // a map or slice of functions, called as name[k](...)
			for _, elt := range value.Elts {
				if kv, ok := elt.(*ast.KeyValueExpr); ok {
					elt = kv.Value
				}
				alias(name, elt)
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			if n.Body == nil {
				break
			}
			if n.Recv == nil {
				p.funcDefs[n.Name.Name] = append(p.funcDefs[n.Name.Name], def{f, n.Body})
			} else {
				p.methodDefs[n.Name.Name] = append(p.methodDefs[n.Name.Name], def{f, n.Body})
			}
		case *ast.ValueSpec:
			for i, name := range n.Names {
				if i < len(n.Values) {
					alias(name, n.Values[i])
				}
			}
		case *ast.AssignStmt:
			if len(n.Lhs) != len(n.Rhs) {
				break
			}
			for i, l := range n.Lhs {
				if name, ok := l.(*ast.Ident); ok {
					alias(name, n.Rhs[i])
				}
			}
		}
		return true
	})
}

type checker struct {
	pkgs map[string]*goPackage
}

// learn marks the defs that can call FailNow and reports whether it marked
// any.
func (c *checker) learn(p *goPackage, defs map[string][]def, failing map[string]bool) bool {
	changed := false
	for name, ds := range defs {
		if failing[name] {
			continue
		}
		for _, d := range ds {
			fails := false
			if e, ok := d.node.(ast.Expr); ok && !isFuncLit(e) {
				fails = c.refersToFailing(p, d.file, e)
			} else {
				c.inspectCalls(p, d.file, d.node, func(*ast.CallExpr) { fails = true })
			}
			if fails {
				failing[name], changed = true, true
				break
			}
		}
	}
	return changed
}

func isFuncLit(e ast.Expr) bool {
	_, ok := e.(*ast.FuncLit)
	return ok
}

// inspectCalls calls found for every call under n that can call FailNow on
// the goroutine running n; bodies run on other goroutines are theirs.
func (c *checker) inspectCalls(p *goPackage, f *ast.File, n ast.Node, found func(*ast.CallExpr)) {
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			return false
		case *ast.CallExpr:
			if goroutineLiteral(f, n) != nil {
				return false
			}
			if c.callFails(p, f, n) {
				found(n)
			}
		}
		return true
	})
}

// callFails reports whether call can call FailNow: a testing.TB method that
// does, testify's require, or a helper that does.
func (c *checker) callFails(p *goPackage, f *ast.File, call *ast.CallExpr) bool {
	fun := ast.Unparen(call.Fun)
	if ix, ok := fun.(*ast.IndexExpr); ok { // an instantiation: recv[T](...)
		fun = ix.X
	}
	if sel, ok := fun.(*ast.SelectorExpr); ok && importRoot(f, sel.X) == "" && failNow[sel.Sel.Name] {
		return true
	}
	return c.refersToFailing(p, f, fun)
}

// refersToFailing reports whether e names a function or method that can call
// FailNow.
func (c *checker) refersToFailing(p *goPackage, f *ast.File, e ast.Expr) bool {
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		return p.failingFuncs[e.Name]
	case *ast.SelectorExpr:
		name := e.Sel.Name
		if pkg, ok := importOf(f, e.X); ok { // pkg.F
			return pkg == requirePath || c.helper(pkg).failingFuncs[name]
		}
		if pkg := importRoot(f, e.X); pkg != "" {
			// A method of a package's variable (http.DefaultClient.Do) or a
			// method expression ((*apitest.Env).Do).
			return c.helper(pkg).failingMethods[name]
		}
		// A method of a value: ours, or of a helper package's type.
		if p.failingMethods[name] {
			return true
		}
		for ip := range p.imports {
			if c.helper(ip).failingMethods[name] {
				return true
			}
		}
	}
	return false
}

var noPackage = &goPackage{}

// helper returns the test-helper package at importPath, or an empty one.
func (c *checker) helper(importPath string) *goPackage {
	if p := c.pkgs[importPath]; p != nil && p.helper {
		return p
	}
	return noPackage
}

// importOf returns the import path x names when x is an imported package's
// name.
func importOf(f *ast.File, x ast.Expr) (string, bool) {
	id, ok := ast.Unparen(x).(*ast.Ident)
	if !ok {
		return "", false
	}
	for _, im := range f.Imports {
		ip, _ := strconv.Unquote(im.Path.Value)
		name := ""
		if im.Name != nil {
			name = im.Name.Name
		} else {
			name = defaultName(ip)
		}
		if name == id.Name {
			return ip, true
		}
	}
	return "", false
}

// importRoot returns the import path of the package x starts from (http in
// http.DefaultClient, apitest in (*apitest.Env)), or "".
func importRoot(f *ast.File, x ast.Expr) string {
	for {
		switch e := x.(type) {
		case *ast.ParenExpr:
			x = e.X
		case *ast.StarExpr:
			x = e.X
		case *ast.SelectorExpr:
			x = e.X
		default:
			pkg, _ := importOf(f, x)
			return pkg
		}
	}
}

var majorVersion = regexp.MustCompile(`^v[0-9]+$`)

// defaultName is the package name an import path is used by without a
// name, by the usual conventions: its last element, skipping a major version
// and trimming a "go-" prefix or "-go" suffix.
func defaultName(importPath string) string {
	elems := strings.Split(importPath, "/")
	name := elems[len(elems)-1]
	if len(elems) > 1 && majorVersion.MatchString(name) {
		name = elems[len(elems)-2]
	}
	name = strings.TrimPrefix(strings.TrimSuffix(name, "-go"), "go-")
	return strings.ReplaceAll(name, "-", "_")
}
