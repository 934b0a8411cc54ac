package main

import (
	"fmt"
	"strconv"
	"strings"
)

// command is one parsed command line.
type command struct {
	name       string
	files      []string // apply, gc
	noCommit   bool
	memoryOnly bool
	timeout    *string // apply --timeout, unparsed: nmstatectl parses it later
	checkpoint string  // commit, rollback
	iface      string  // show
}

const topUsage = "nmstatectl [OPTIONS] <SUBCOMMAND>"

// clapError is clap 3's refusal of an argument (18-21): exit 2, no banner.
func clapError(arg, usage string, candidates []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "error: Found argument '%s' which wasn't expected, or isn't valid in this context\n", arg)
	if strings.HasPrefix(arg, "--") {
		if s := didYouMean(strings.TrimPrefix(arg, "--"), candidates); s != "" {
			fmt.Fprintf(&b, "\n\tDid you mean '--%s'?\n", s)
			// clap puts the suggestion in the usage line (19-arg-verbose).
			usage = strings.Replace(usage, "[OPTIONS]", "--"+s, 1)
		}
	}
	if strings.HasPrefix(arg, "-") {
		fmt.Fprintf(&b, "\n\tIf you tried to supply `%s` as a value rather than a flag, use `-- %s`\n", arg, arg)
	}
	fmt.Fprintf(&b, "\nUSAGE:\n    %s\n\nFor more information try --help", usage)
	return &exitError{2, b.String()}
}

// didYouMean is clap's suggestion: the most similar candidate whose
// Jaro-Winkler similarity exceeds 0.8.
func didYouMean(arg string, candidates []string) string {
	best, score := "", 0.8
	for _, c := range candidates {
		if s := jaroWinkler(arg, c); s > score {
			best, score = c, s
		}
	}
	return best
}

func jaroWinkler(a, b string) float64 {
	j := jaro(a, b)
	l := 0
	for l < len(a) && l < len(b) && l < 4 && a[l] == b[l] {
		l++
	}
	return j + float64(l)*0.1*(1-j)
}

func jaro(a, b string) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	window := max(len(a), len(b))/2 - 1
	window = max(window, 0)
	am, bm := make([]bool, len(a)), make([]bool, len(b))
	m := 0
	for i := range a {
		for k := max(0, i-window); k < min(len(b), i+window+1); k++ {
			if !bm[k] && a[i] == b[k] {
				am[i], bm[k] = true, true
				m++
				break
			}
		}
	}
	if m == 0 {
		return 0
	}
	t, k := 0, 0
	for i := range a {
		if !am[i] {
			continue
		}
		for !bm[k] {
			k++
		}
		if a[i] != b[k] {
			t++
		}
		k++
	}
	fm := float64(m)
	return (fm/float64(len(a)) + fm/float64(len(b)) + (fm-float64(t)/2)/fm) / 3
}

// globalLongFlags are nmstatectl's own (its clap App: --help, --version).
var globalLongFlags = []string{"help", "version"}

// subcommands nmstatectl has; those not modelled are declined.
var subcommands = map[string]string{
	"show": "show", "apply": "apply", "set": "apply", "a": "apply",
	"commit": "commit", "rollback": "rollback", "gc": "gc", "version": "version",
	"edit": "", "format": "", "policy": "", "service": "", "statistic": "", "autoconf": "", "persist-nic-names": "", "help": "",
}

func parseArgs(args []string) (*command, error) {
	if len(args) == 0 {
		return nil, declined("nmstatectl without a subcommand")
	}
	first := args[0]
	if strings.HasPrefix(first, "-") {
		if first == "-h" || first == "--help" || first == "-V" || first == "--version" {
			return nil, declined("nmstatectl %s", first)
		}
		return nil, clapError(first, topUsage, globalLongFlags)
	}
	name, known := subcommands[first]
	if !known {
		return nil, clapError(first, topUsage, nil)
	}
	if name == "" {
		return nil, declined("nmstatectl %s", first)
	}
	c := &command{name: name}
	rest := args[1:]
	usage := "nmstatectl " + first + " [OPTIONS]"
	var positional []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "-" || !strings.HasPrefix(a, "-") {
			positional = append(positional, a)
			continue
		}
		switch {
		case name == "apply" && a == "--no-commit":
			c.noCommit = true
		case name == "apply" && a == "--memory-only":
			c.memoryOnly = true
		case name == "apply" && a == "--no-verify":
		case name == "apply" && (a == "--timeout" || a == "-t"):
			if i+1 >= len(rest) {
				return nil, declined("apply %s without a value", a)
			}
			i++
			c.timeout = &rest[i]
		case name == "apply" && strings.HasPrefix(a, "--timeout="):
			v := strings.TrimPrefix(a, "--timeout=")
			c.timeout = &v
		case a == "-h" || a == "--help":
			return nil, declined("nmstatectl %s %s", first, a)
		case name == "apply" && (a == "-k" || a == "--kernel" || a == "-s" || a == "--show-secrets"),
			name == "show" && (a == "-k" || a == "--kernel" || a == "-s" || a == "--show-secrets" || a == "-r" || a == "--running-config" || a == "--json"),
			name == "gc" && (a == "-o" || a == "--output"):
			return nil, declined("nmstatectl %s %s", first, a)
		default:
			return nil, clapError(a, usage, nil)
		}
	}
	switch name {
	case "apply":
		c.files = positional
	case "gc":
		if len(positional) > 1 {
			return nil, clapError(positional[1], usage, nil)
		}
		c.files = positional
	case "commit", "rollback":
		if len(positional) > 1 {
			return nil, clapError(positional[1], usage, nil)
		}
		if len(positional) == 1 {
			c.checkpoint = positional[0]
		}
	case "show":
		if len(positional) > 1 {
			return nil, clapError(positional[1], usage, nil)
		}
		if len(positional) == 1 {
			c.iface = positional[0]
		}
	case "version":
		if len(positional) > 0 {
			return nil, clapError(positional[0], usage, nil)
		}
	}
	return c, nil
}

// parseTimeout is nmstatectl's u32 parse, with Rust's ParseIntError texts
// (20-arg-timeout-not-number) and its exit 65. Unset: nmstate's default.
func parseTimeout(p *string) (uint32, error) {
	if p == nil {
		return 0, nil
	}
	if *p == "" {
		return 0, &exitError{65, "cannot parse integer from empty string"}
	}
	digits := strings.TrimPrefix(*p, "+")
	if digits == "" {
		return 0, &exitError{65, "invalid digit found in string"}
	}
	for _, r := range digits {
		if r < '0' || r > '9' {
			return 0, &exitError{65, "invalid digit found in string"}
		}
	}
	v, err := strconv.ParseUint(digits, 10, 32)
	if err != nil {
		return 0, &exitError{65, "number too large to fit in target type"}
	}
	return uint32(v), nil
}
