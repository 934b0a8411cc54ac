package deps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The run's own rules (docs/architecture.md, "A run, phase by phase"), held
// in fact over package agent's code, type-checked:
//   - env is written in newEnv alone (no assignment to one of its fields
//     anywhere else), and the process environment and the wall clock are
//     read there alone;
//   - no retry closure (the attempt handed to retry.Policy.Do or
//     retry.Value) assigns a variable it shares with other attempts or
//     with its caller: an attempt returns what it produced; and the CA
//     files are written (env.rotateCA) by the register and fetch-network
//     phases once their retries are over, not by an attempt;
//   - the state file has one writer: state.State.Save is called in
//     env.saveState alone, and only the phase runner (and `agent
//     --reset-network`, which is no run) calls that;
//   - the phase tag is added in env.phase alone: no other function of any
//     package linked into the agent gives a logger the "phase" field, and
//     none but env.phase makes a *phase.

const agentImport = selfModule + "/agent"

// The names the rules and docs/architecture.md share.
const (
	envMaker    = "newEnv"
	stateWriter = "saveState"
	phaseTagger = "phase"
)

// stateWriterCallers may call env.saveState: the phase runner, and the
// network reset (a command of its own, with no phases to run).
var stateWriterCallers = []string{"runPhases", "runStage", "ResetNetwork"}

// agentCode is package agent type-checked, and the other packages linked
// into the agent parsed.
type agentCode struct {
	fset  *token.FileSet
	files []*ast.File
	info  *types.Info
	// others are the files of the module's other packages linked into
	// the agent, by package.
	others map[string][]*ast.File
}

// agentExportsList is go list's answer for the agent's packages and their
// export data, asked once a test binary: every load reads the same tree.
var agentExportsList struct {
	sync.Mutex
	out []byte
}

func agentExports(t *testing.T) []byte {
	t.Helper()
	agentExportsList.Lock()
	defer agentExportsList.Unlock()
	if agentExportsList.out != nil {
		return agentExportsList.out
	}
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export,Dir,GoFiles", "./cmd/agent")
	cmd.Dir = moduleRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	agentExportsList.out = out
	return out
}

// loadAgentCode type-checks package agent from its files as the build lists
// them, with throwaway (a file name and its source, nil for none) added to
// them: a change the rules must catch, made without touching the tree.
func loadAgentCode(t *testing.T, throwaway map[string]string) *agentCode {
	t.Helper()
	out := agentExports(t)
	exports := map[string]string{}
	type goPkg struct {
		ImportPath, Export, Dir string
		GoFiles                 []string
	}
	var agent *goPkg
	var mine []goPkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p goPkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		switch {
		case p.ImportPath == agentImport:
			agent = &p
		case strings.HasPrefix(p.ImportPath, selfModule+"/"):
			mine = append(mine, p)
		}
	}
	if agent == nil {
		t.Fatalf("%s is not linked into the agent", agentImport)
	}
	c := &agentCode{fset: token.NewFileSet(), others: map[string][]*ast.File{}}
	for _, name := range agent.GoFiles {
		f, err := parser.ParseFile(c.fset, filepath.Join(agent.Dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		c.files = append(c.files, f)
	}
	for name, src := range throwaway {
		f, err := parser.ParseFile(c.fset, filepath.Join(agent.Dir, name), src, 0)
		if err != nil {
			t.Fatal(err)
		}
		c.files = append(c.files, f)
	}
	for _, p := range mine {
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(c.fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			c.others[p.ImportPath] = append(c.others[p.ImportPath], f)
		}
	}
	lookup := func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	}
	c.info = &types.Info{
		Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{},
		Defs: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{},
	}
	conf := types.Config{Importer: importer.ForCompiler(c.fset, "gc", lookup)}
	if _, err := conf.Check(agentImport, c.fset, c.files, c.info); err != nil {
		t.Fatalf("type-checking %s: %v", agentImport, err)
	}
	return c
}

// funcName names a function declaration as the rules do: env.phase,
// newEnv.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// eachFunc calls fn with every top-level function of the agent's files and
// its name; a function literal outside any (phaseList's calls) is seen with
// the name of the variable that holds it.
func (c *agentCode) eachFunc(fn func(name string, body ast.Node)) {
	for _, f := range c.files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Body != nil {
					fn(funcName(d), d.Body)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if vs, ok := s.(*ast.ValueSpec); ok && len(vs.Names) > 0 {
						for _, v := range vs.Values {
							fn(vs.Names[0].Name, v)
						}
					}
				}
			}
		}
	}
}

func (c *agentCode) pos(n ast.Node) string {
	p := c.fset.Position(n.Pos())
	return fmt.Sprintf("%s:%d", filepath.Base(p.Filename), p.Line)
}

// isEnv: t is agent's env or a pointer to it.
func isEnv(t types.Type) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	return ok && n.Obj().Name() == "env" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == agentImport
}

// assigned is every expression a statement writes: assignments (not
// declarations) and ++/--.
func assigned(n ast.Node) []ast.Expr {
	switch s := n.(type) {
	case *ast.AssignStmt:
		if s.Tok != token.DEFINE {
			return s.Lhs
		}
	case *ast.IncDecStmt:
		return []ast.Expr{s.X}
	}
	return nil
}

// envWrites lists every assignment to a field of an env (or to a whole
// env) outside newEnv.
func envWrites(c *agentCode) []string {
	var bad []string
	c.outsideEnvMaker(func(name string, n ast.Node) {
		for _, lhs := range assigned(n) {
			for x := lhs; x != nil; {
				if tv, ok := c.info.Types[x]; ok && isEnv(tv.Type) && x == lhs {
					bad = append(bad, fmt.Sprintf("%s: %s assigns a whole env: the environment is fixed in %s", c.pos(lhs), name, envMaker))
				}
				if e, ok := x.(*ast.SelectorExpr); ok {
					if sel := c.info.Selections[e]; sel != nil && sel.Kind() == types.FieldVal && isEnv(sel.Recv()) {
						bad = append(bad, fmt.Sprintf("%s: %s assigns env.%s: the environment is fixed in %s", c.pos(lhs), name, e.Sel.Name, envMaker))
					}
				}
				x = inner(x)
			}
		}
	})
	return bad
}

// processReads are the calls that read the process environment or the
// wall clock, which a run reads in newEnv alone (the clock through
// Options.Clock after).
var processReads = map[string][]string{"os": {"Getenv", "LookupEnv", "Environ"}, "time": {"Now", "Since", "Until"}}

// envReads lists every read of the process environment or the wall clock
// outside newEnv.
func envReads(c *agentCode) []string {
	var bad []string
	c.outsideEnvMaker(func(name string, n ast.Node) {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return
		}
		f, ok := c.info.Uses[sel.Sel].(*types.Func)
		if ok && f.Pkg() != nil && slices.Contains(processReads[f.Pkg().Path()], f.Name()) && f.Type().(*types.Signature).Recv() == nil {
			bad = append(bad, fmt.Sprintf("%s: %s reads %s.%s: the environment and the clock are read in %s (Options.Clock after)", c.pos(n), name, f.Pkg().Path(), f.Name(), envMaker))
		}
	})
	return bad
}

// outsideEnvMaker calls fn with every node of every function but newEnv,
// the one place the environment may be made from the process.
func (c *agentCode) outsideEnvMaker(fn func(name string, n ast.Node)) {
	c.eachFunc(func(name string, body ast.Node) {
		if name == envMaker {
			return
		}
		ast.Inspect(body, func(n ast.Node) bool {
			fn(name, n)
			return true
		})
	})
}

// retryCallee: call is retry.Policy.Do or retry.Value.
func retryCallee(c *agentCode, call *ast.CallExpr) bool {
	fun := call.Fun
	if ix, ok := fun.(*ast.IndexExpr); ok {
		fun = ix.X
	}
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	obj := c.info.Uses[sel.Sel]
	f, ok := obj.(*types.Func)
	return ok && f.Pkg() != nil && f.Pkg().Path() == selfModule+"/agent/retry" && (f.Name() == "Do" || f.Name() == "Value")
}

// rootIdent is the variable an assigned expression writes into: x in x,
// x.f, x[i], *x.
func rootIdent(x ast.Expr) *ast.Ident {
	for x != nil {
		if id, ok := x.(*ast.Ident); ok {
			return id
		}
		x = inner(x)
	}
	return nil
}

// inner is one step into what an assigned expression writes: x of x.f,
// x[i], *x and (x); nil past the last.
func inner(x ast.Expr) ast.Expr {
	switch e := x.(type) {
	case *ast.SelectorExpr:
		return e.X
	case *ast.IndexExpr:
		return e.X
	case *ast.StarExpr:
		return e.X
	case *ast.ParenExpr:
		return e.X
	}
	return nil
}

// retryCaptures lists every assignment, in an attempt handed to the retry
// loop, to a variable declared outside that attempt.
func retryCaptures(c *agentCode) []string {
	var bad []string
	c.eachFunc(func(name string, body ast.Node) {
		ast.Inspect(body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !retryCallee(c, call) {
				return true
			}
			for _, arg := range call.Args {
				lit, ok := arg.(*ast.FuncLit)
				if !ok {
					continue
				}
				ast.Inspect(lit.Body, func(n ast.Node) bool {
					for _, lhs := range assigned(n) {
						id := rootIdent(lhs)
						if id == nil || id.Name == "_" {
							continue
						}
						obj, ok := c.info.Uses[id].(*types.Var)
						if ok && (obj.Pos() < lit.Pos() || obj.Pos() >= lit.End()) {
							bad = append(bad, fmt.Sprintf("%s: a retry attempt in %s assigns %s, declared outside it: return the attempt's value (retry.Value)", c.pos(lhs), name, id.Name))
						}
					}
					return true
				})
			}
			return true
		})
	})
	return bad
}

// calls lists, by calling function, the calls for which match is true.
func (c *agentCode) calls(match func(*ast.CallExpr) bool) map[string][]string {
	out := map[string][]string{}
	c.eachFunc(func(name string, body ast.Node) {
		ast.Inspect(body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok && match(call) {
				out[name] = append(out[name], c.pos(call))
			}
			return true
		})
	})
	return out
}

// method: call calls the method name of a type named typ in package pkg.
func (c *agentCode) method(call *ast.CallExpr, pkg, typ, name string) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	s := c.info.Selections[sel]
	if s == nil || s.Kind() != types.MethodVal {
		return false
	}
	r := s.Recv()
	if p, ok := r.(*types.Pointer); ok {
		r = p.Elem()
	}
	n, ok := r.(*types.Named)
	return ok && n.Obj().Name() == typ && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == pkg
}

// stateWrites lists every write of the state file but the one writer's,
// and every call of the writer from outside the runner.
func stateWrites(c *agentCode) []string {
	var bad []string
	saves := c.calls(func(call *ast.CallExpr) bool { return c.method(call, selfModule+"/internal/state", "State", "Save") })
	for _, fn := range sortedKeys(saves) {
		if fn != "env."+stateWriter {
			bad = append(bad, fmt.Sprintf("%s: %s saves the state file: only env.%s does, with the state a phase returned", saves[fn][0], fn, stateWriter))
		}
	}
	if len(saves["env."+stateWriter]) != 1 {
		bad = append(bad, fmt.Sprintf("env.%s saves the state file %d times, want once", stateWriter, len(saves["env."+stateWriter])))
	}
	callers := c.calls(func(call *ast.CallExpr) bool { return c.method(call, agentImport, "env", stateWriter) })
	for _, fn := range sortedKeys(callers) {
		if !slices.Contains(stateWriterCallers, strings.TrimPrefix(fn, "env.")) {
			bad = append(bad, fmt.Sprintf("%s: %s calls env.%s: only the phase runner does (%v)", callers[fn][0], fn, stateWriter, stateWriterCallers))
		}
	}
	return bad
}

// caDeciders may call env.rotateCA, which writes the CA files: the phases
// whose retries are over, never an attempt (registerOnce, askNetwork).
var caDeciders = []string{"env.register", "env.fetchNetwork"}

// caWrites lists every call of env.rotateCA from elsewhere.
func caWrites(c *agentCode) []string {
	var bad []string
	callers := c.calls(func(call *ast.CallExpr) bool { return c.method(call, agentImport, "env", "rotateCA") })
	for _, fn := range sortedKeys(callers) {
		if !slices.Contains(caDeciders, fn) {
			bad = append(bad, fmt.Sprintf("%s: %s calls env.rotateCA: the CA files are written by a phase once its retries are over (%v), never by an attempt", callers[fn][0], fn, caDeciders))
		}
	}
	return bad
}

// phaseKey: e is the constant "phase".
func phaseKey(info *types.Info, e ast.Expr) bool {
	if info != nil {
		tv, ok := info.Types[e]
		return ok && tv.Value != nil && tv.Value.Kind() == constant.String && constant.StringVal(tv.Value) == "phase"
	}
	lit, ok := e.(*ast.BasicLit)
	return ok && lit.Kind == token.STRING && lit.Value == `"phase"`
}

// tagsPhase: n gives a logger the phase field (WithField("phase", ...), or
// a Fields literal with that key). Naming the phase a PhaseError carries
// (WithField("phase", pe.Phase): cmd/agent's verdict, once the run is over)
// reports a phase, it does not tag one's lines.
func tagsPhase(info *types.Info, n ast.Node) bool {
	switch n := n.(type) {
	case *ast.CallExpr:
		sel, ok := n.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "WithField" || len(n.Args) != 2 || !phaseKey(info, n.Args[0]) {
			return false
		}
		v, ok := n.Args[1].(*ast.SelectorExpr)
		return !ok || v.Sel.Name != "Phase"
	case *ast.KeyValueExpr:
		return phaseKey(info, n.Key)
	}
	return false
}

// phaseTags lists every phase tag but env.phase's, in package agent and in
// every other package linked into the agent, and every *phase made outside
// env.phase.
func phaseTags(c *agentCode) []string {
	var bad []string
	c.eachFunc(func(name string, body ast.Node) {
		if name == "env."+phaseTagger {
			return
		}
		ast.Inspect(body, func(n ast.Node) bool {
			if tagsPhase(c.info, n) {
				bad = append(bad, fmt.Sprintf("%s: %s tags a logger with the phase: only env.%s does", c.pos(n), name, phaseTagger))
			}
			if lit, ok := n.(*ast.CompositeLit); ok {
				if tv, ok := c.info.Types[lit]; ok {
					if nt, ok := tv.Type.(*types.Named); ok && nt.Obj().Name() == "phase" && nt.Obj().Pkg().Path() == agentImport {
						bad = append(bad, fmt.Sprintf("%s: %s makes a phase: only env.%s does, its logger tagged", c.pos(n), name, phaseTagger))
					}
				}
			}
			return true
		})
	})
	for _, p := range slices.Sorted(maps.Keys(c.others)) {
		for _, f := range c.others[p] {
			ast.Inspect(f, func(n ast.Node) bool {
				if tagsPhase(nil, n) {
					bad = append(bad, fmt.Sprintf("%s: %s tags a logger with the phase: only agent's env.%s does", c.pos(n), p, phaseTagger))
				}
				return true
			})
		}
	}
	return bad
}

// TestRunEnvironmentIsReadOnly holds package agent to the rules.
func TestRunEnvironmentIsReadOnly(t *testing.T) {
	c := loadAgentCode(t, nil)
	for _, check := range []func(*agentCode) []string{envWrites, envReads, retryCaptures, caWrites, stateWrites, phaseTags} {
		for _, msg := range check(c) {
			t.Error(msg)
		}
	}
	// The rules must see what they guard: the runner's one save and one
	// tag, and the retry loops of register and fetch-network.
	saves := c.calls(func(call *ast.CallExpr) bool { return c.method(call, selfModule+"/internal/state", "State", "Save") })
	retries := c.calls(func(call *ast.CallExpr) bool { return retryCallee(c, call) })
	rotations := c.calls(func(call *ast.CallExpr) bool { return c.method(call, agentImport, "env", "rotateCA") })
	if len(saves["env."+stateWriter]) != 1 || len(retries["env.register"]) != 1 || len(retries["env.fetchNetwork"]) != 1 || len(rotations) != len(caDeciders) {
		t.Errorf("the checks see saves %v, retry loops %v and CA rotations %v: they no longer look where they should", saves, retries, rotations)
	}
}

// Each rule fails when broken: a throwaway file added to package agent
// makes the one message its rule gives.
func TestRunEnvironmentRulesFailWhenBroken(t *testing.T) {
	const head = `package agent

import (
	"context"

	"os"
	"time"

	"github.com/nodereg/nodereg/agent/retry"
	"github.com/nodereg/nodereg/internal/state"
)

var _ = retry.Value[int]
var _ state.State
var _ context.Context
var _, _ = os.Getpid, time.Second
`
	for _, c := range []struct {
		name, src, want string
		check           func(*agentCode) []string
	}{
		{"env field", `func (e *env) zzThrowaway() { e.log = nil }`, "zz_throwaway.go:18: env.zzThrowaway assigns env.log", envWrites},
		{"env option", `func zzThrowaway(e *env) { e.o.Root = "/x" }`, "zz_throwaway.go:18: zzThrowaway assigns env.o", envWrites},
		{"clock read", `func zzThrowaway() int64 { return time.Now().Unix() }`, "zz_throwaway.go:18: zzThrowaway reads time.Now", envReads},
		{"environment read", `func zzThrowaway() string { return os.Getenv("NODEREG_X") }`, "zz_throwaway.go:18: zzThrowaway reads os.Getenv", envReads},
		{"retry captured", `func (e *env) zzThrowaway(ctx context.Context) int {
	n := 0
	_ = e.policy(0, nil).Do(ctx, "x", func(context.Context, int) error { n++; return nil })
	return n
}`, "zz_throwaway.go:20: a retry attempt in env.zzThrowaway assigns n", retryCaptures},
		{"retry value captured", `func (e *env) zzThrowaway(ctx context.Context) (last int) {
	_, _ = retry.Value(ctx, retry.Policy{}, "x", func(_ context.Context, attempt int) (int, error) { last = attempt; return attempt, nil })
	return last
}`, "zz_throwaway.go:19: a retry attempt in env.zzThrowaway assigns last", retryCaptures},
		{"CA written by an attempt", `func (e *env) zzThrowaway(ctx context.Context, ph *phase) { e.rotateCA(ctx, ph, caAnnouncement{}) }`,
			"zz_throwaway.go:18: env.zzThrowaway calls env.rotateCA", caWrites},
		{"second state writer", `func (e *env) zzThrowaway(ph *phase, st state.State) error { return st.Save(ph.files, e.o.StatePath) }`,
			"zz_throwaway.go:18: env.zzThrowaway saves the state file", stateWrites},
		{"writer called in a phase", `func (e *env) zzThrowaway(ph *phase) error { return e.saveState(ph, state.State{}) }`,
			"zz_throwaway.go:18: env.zzThrowaway calls env.saveState", stateWrites},
		{"phase tagged by hand", `func (e *env) zzThrowaway() { e.log.WithField("phase", PhaseRegister).Info("x") }`,
			"zz_throwaway.go:18: env.zzThrowaway tags a logger with the phase", phaseTags},
		{"phase made by hand", `func (e *env) zzThrowaway() *phase { return &phase{name: PhaseRegister, log: e.log} }`,
			"zz_throwaway.go:18: env.zzThrowaway makes a phase", phaseTags},
	} {
		code := loadAgentCode(t, map[string]string{"zz_throwaway.go": head + "\n" + c.src + "\n"})
		got := c.check(code)
		if len(got) != 1 || !strings.HasPrefix(got[0], c.want) {
			t.Errorf("%s: %q, want one message starting %q", c.name, got, c.want)
		}
	}
}

// pageText is docs/architecture.md with its line breaks and runs of spaces
// made single spaces, so a claim is found however the page wraps it.
func pageText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot(), architecturePage))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// The page says what TestRunEnvironmentIsReadOnly holds, naming what it
// names: who writes env, who writes the state file, who tags a logger with
// the phase, and what a retry attempt may do.
func TestArchitecturePageStatesTheRunRules(t *testing.T) {
	page := pageText(t)
	for _, claim := range []string{
		"fixed in `" + envMaker + "` and never written after: there is no assignment to its fields outside `" + envMaker + "`",
		"The state file is written in one place, `env." + stateWriter + "`, which the runner calls when a phase's call returns",
		"The phase tag is added in one place, `env." + phaseTagger + "`: no other function of the agent's packages gives a logger the `phase` field",
		"An attempt returns what it produced (`retry.Value`) and assigns nothing declared outside it, and writes no CA file",
		"`tests/deps` (`TestRunEnvironmentIsReadOnly`, type-checked over package `agent`) holds these rules: no assignment to an `env` field outside `" + envMaker + "`, and no read of the process environment or the wall clock outside it",
	} {
		if !strings.Contains(page, claim) {
			t.Errorf("%s does not say %q: say it, or change the rule and its test together", architecturePage, claim)
		}
	}
}
