package main

import (
	"fmt"
	"slices"
)

// finish commits or rolls back the pending checkpoint (or the one named):
// stdout is one newline (07-commit, 11-rollback); none pending is nmstate's
// NotFound (16, 17).
func finish(sub, named string) error {
	nm, err := currentBackend()
	if err != nil {
		return err
	}
	cps, err := nm.checkpoints()
	if err != nil {
		return err
	}
	if len(cps) == 0 {
		return nmErr("Bug", "NotFound: Not active checkpoints")
	}
	cp := cps[0]
	if named != "" {
		if !slices.Contains(cps, named) {
			return declined("%s of checkpoint %s, which is not pending", sub, named)
		}
		cp = named
	}
	if sub == "commit" {
		err = nm.destroyCheckpoint(cp)
	} else {
		err = nm.rollbackCheckpoint(cp)
	}
	if err != nil {
		return err
	}
	fmt.Println()
	return nil
}

// hangCheckpoint is the checkpoint a hanging apply holds.
func hangCheckpoint() error {
	nm, err := currentBackend()
	if err != nil {
		return err
	}
	_, err = nm.createCheckpoint(defaultTimeout)
	return err
}
