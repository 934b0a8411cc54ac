// Command gotest runs a `go test` command line with -json added and prints
// what go test itself would print (without -v: each package's result line
// and the output of failing tests; with -v: everything), and appends every
// skipped test with its reason to the -skips file, so `make test`
// (tests/stages.sh) can end with a list of what did not run and why.
// Without -json go test does not say which tests skipped unless -v.
//
//	gotest [-skips FILE] -- go test [flags] [packages]
//
// The exit status is go test's.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

func main() {
	skipsPath := flag.String("skips", "", "append `pkg test: reason` lines for skipped tests to this file")
	flag.Parse()
	args := flag.Args()
	if len(args) < 2 || args[1] != "test" {
		fmt.Fprintln(os.Stderr, "gotest: usage: gotest [-skips FILE] -- go test [flags] [packages]")
		os.Exit(64)
	}
	verbose := false
	for _, a := range args[2:] {
		if a == "-v" || a == "-test.v" || a == "-v=true" {
			verbose = true
		}
	}
	cmd := exec.Command(args[0], append([]string{"test", "-json"}, args[2:]...)...)
	cmd.Stdin, cmd.Stderr = os.Stdin, os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fatal(err)
	}
	if err := cmd.Start(); err != nil {
		fatal(err)
	}
	skips := filter(out, os.Stdout, verbose)
	err = cmd.Wait()
	if *skipsPath != "" && len(skips) > 0 {
		f, ferr := os.OpenFile(*skipsPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if ferr != nil {
			fatal(ferr)
		}
		for _, s := range skips {
			fmt.Fprintln(f, s)
		}
		if ferr := f.Close(); ferr != nil {
			fatal(ferr)
		}
	}
	if exit, ok := err.(*exec.ExitError); ok {
		os.Exit(exit.ExitCode())
	}
	if err != nil {
		fatal(err)
	}
}

// filter copies the human output of a `go test -json` stream to w and
// returns the skipped tests, "pkg test: reason".
func filter(r io.Reader, w io.Writer, verbose bool) []string {
	var skips []string
	buf := map[string][]string{} // output of each running test, by pkg+test
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Action == "" {
			// Not an event (a line go test printed itself): keep it.
			fmt.Fprintln(w, sc.Text())
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "output" || e.Action == "build-output":
			if e.Test != "" {
				buf[key] = append(buf[key], e.Output)
			}
			if verbose || (e.Test == "" && e.Output != "PASS\n") {
				io.WriteString(w, e.Output) // ok/FAIL lines, build errors, panics
			}
		case e.Test == "":
		case e.Action == "fail":
			if !verbose {
				io.WriteString(w, strings.Join(buf[key], ""))
			}
			delete(buf, key)
		case e.Action == "skip":
			skips = append(skips, e.Package+" "+e.Test+": "+reason(buf[key]))
			delete(buf, key)
		case e.Action == "pass":
			delete(buf, key)
		}
	}
	return skips
}

// reason is what the test printed (t.Skip's message, file:line first),
// without go test's own framing lines, on one line.
func reason(lines []string) string {
	var parts []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		parts = append(parts, t)
	}
	s := strings.Join(parts, " | ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	if s == "" {
		s = "(no reason given)"
	}
	return s
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "gotest:", err)
	os.Exit(1)
}
