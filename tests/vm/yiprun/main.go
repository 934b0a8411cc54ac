// Command yiprun is the VM lab's stand-in for `elemental run-stage --strict`:
// it runs one boot stage (S.before, S, S.after) over the toolkit's cloud-init
// paths with mudler/yip's real executor, configured as Elemental's runner is
// (only the node and if conditionals), on the real root of the booted guest.
// docs/vmlab.md says where the lab runs it and why.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/mudler/yip/pkg/console"
	"github.com/mudler/yip/pkg/executor"
	"github.com/mudler/yip/pkg/plugins"
	"github.com/sirupsen/logrus"
	"github.com/twpayne/go-vfs/v4"
)

// cloudInitPaths are the toolkit's default paths, in its order; those that do
// not exist are dropped, as run-stage drops them.
var cloudInitPaths = []string{"/system/oem", "/oem/", "/usr/local/cloud-config/"}

// exitStageFailed is Elemental's exit code for a stage with errors
// (CloudInitRunStage), returned after every step has run.
const exitStageFailed = 65

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: yiprun STAGE")
		os.Exit(64)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "yiprun: stage %s: %v\n", os.Args[1], err)
		os.Exit(exitStageFailed)
	}
}

func run(stage string) error {
	l := logrus.New()
	l.SetOutput(os.Stderr)
	l.SetLevel(logrus.InfoLevel)
	ex := executor.NewExecutor(executor.WithLogger(l),
		executor.WithConditionals(plugins.NodeConditional, plugins.IfConditional))
	con := console.NewStandardConsole(console.WithLogger(l))
	var paths []string
	for _, p := range cloudInitPaths {
		if _, err := os.Stat(p); err == nil {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		l.Infof("no cloud-init path exists; nothing to run for %s", stage)
		return nil
	}
	var errs []error
	for _, s := range []string{stage + ".before", stage, stage + ".after"} {
		// Each path separately, in order, as run-stage does (REFERENCE.md 2.1
		// as summarised in docs/vmlab.md).
		for _, p := range paths {
			if err := ex.Run(s, vfs.OSFS, con, p); err != nil {
				errs = append(errs, fmt.Errorf("%s over %s: %w", s, p, err))
			}
		}
	}
	return errors.Join(errs...)
}
