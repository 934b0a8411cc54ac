// Command slowest reads `go test -json` on stdin and prints the ten
// slowest tests (subtests included) with their elapsed time, then each
// package's, so `make test-slow` shows where the suite's time goes.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"
)

type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
}

type timing struct {
	name    string
	elapsed float64
}

func main() {
	var tests, pkgs []timing
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || (e.Action != "pass" && e.Action != "fail") {
			continue
		}
		if e.Test == "" {
			pkgs = append(pkgs, timing{e.Package, e.Elapsed})
		} else {
			tests = append(tests, timing{e.Package + " " + e.Test, e.Elapsed})
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "slowest:", err)
		os.Exit(1)
	}
	show := func(title string, l []timing, n int) {
		slices.SortFunc(l, func(a, b timing) int { return cmp.Compare(b.elapsed, a.elapsed) })
		fmt.Println(title)
		for _, t := range l[:min(n, len(l))] {
			fmt.Printf("  %7.2fs  %s\n", t.elapsed, t.name)
		}
	}
	show("slowest tests:", tests, 10)
	show("slowest packages:", pkgs, 5)
}
