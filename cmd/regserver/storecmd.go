package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	cmdline "github.com/nodereg/nodereg/internal/cli"
	"github.com/nodereg/nodereg/server"
	"github.com/nodereg/nodereg/server/store"
)

// storeCommand is `regserver store export|prune --store FILE`: the state
// as JSON on stdout, and the clean-up of stale inventories, on a store no
// regserver holds (docs/regserver.md, Commands).
func storeCommand(stdout, stderr io.Writer) *cobra.Command {
	storeCmd := &cobra.Command{
		Use:   "store",
		Short: "Read or clean up a store without serving it",
		Args:  cmdline.NoArgs,
		// Without a subcommand cobra would print help and exit 0: a
		// missing command is a bad command line.
		RunE: func(*cobra.Command, []string) error {
			return errors.New("a command is required: export, prune")
		},
	}
	storeCmd.AddCommand(exportCommand(stdout, stderr), pruneCommand(stdout, stderr))
	return storeCmd
}

func exportCommand(stdout, stderr io.Writer) *cobra.Command {
	var path string
	export := &cobra.Command{
		Use:   "export --store FILE",
		Short: "Print a store's whole state as JSON on stdout",
		Long: `Prints the store's whole state (inventories, address claims, hardware data)
as JSON on stdout, for humans and backups; starting regserver with --store on a
file holding that JSON imports it. The store is opened read-only, and not
while a running regserver holds it.

A damaged store is exported as far as it reads: each record that could not
be read is named on stderr, and the exit status is 1.`,
		Args: cmdline.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			problems, err := store.ExportFile(path, stdout)
			if err != nil {
				fmt.Fprintln(stderr, "regserver:", err)
				return cmdline.Done(exitConfig)
			}
			if len(problems) > 0 {
				for _, p := range problems {
					fmt.Fprintf(stderr, "regserver: store %s: not exported: %s\n", path, p)
				}
				fmt.Fprintf(stderr, "regserver: store %s is damaged: exported everything else (%d records could not be read)\n", path, len(problems))
				return cmdline.Done(exitFail)
			}
			return nil
		},
	}
	export.Flags().StringVar(&path, "store", "", "the store file (required)")
	_ = export.MarkFlagRequired("store")
	return export
}

func pruneCommand(stdout, stderr io.Writer) *cobra.Command {
	var (
		path   string
		remove bool
		c      store.StaleCriteria
	)
	prune := &cobra.Command{
		Use:   "prune --store FILE [--unaddressed D] [--unseen D] [--remove]",
		Short: "List, or remove, inventories that never got an address or were not seen for a time",
		Long: `Lists the inventories that never got an address (--unaddressed D: created at
least D ago) or have not registered for D (--unseen D), as JSON on stdout; with
--remove deletes them and their claims, releasing their addresses (claims
waiting for an address get them at the next start). The admin API's
/admin/stale does the same on a running regserver.`,
		Args: cmdline.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if c.Unaddressed <= 0 && c.Unseen <= 0 {
				return errors.New("say which inventories are stale: --unaddressed D and/or --unseen D")
			}
			rep, err := prune(path, c, remove)
			if err != nil {
				fmt.Fprintln(stderr, "regserver:", err)
				return cmdline.Done(exitConfig)
			}
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(rep)
		},
	}
	prune.Flags().StringVar(&path, "store", "", "the store file (required)")
	prune.Flags().DurationVar(&c.Unaddressed, "unaddressed", 0, "inventories whose claims never got an address, created at least this long ago (e.g. 1h)")
	prune.Flags().DurationVar(&c.Unseen, "unseen", 0, "inventories that did not register for this long (e.g. 720h)")
	prune.Flags().BoolVar(&remove, "remove", false, "remove them (default: only list)")
	_ = prune.MarkFlagRequired("store")
	return prune
}

// prune lists or removes the stale inventories of a store file.
func prune(path string, c store.StaleCriteria, remove bool) (server.StaleReport, error) {
	if _, err := os.Stat(path); err != nil {
		return server.StaleReport{}, fmt.Errorf("store %s: %w", path, err)
	}
	st, err := store.Open(path)
	if err != nil {
		return server.StaleReport{}, err
	}
	defer st.Close()
	var rep server.StaleReport
	err = st.Update(func(s *store.State) (bool, error) {
		rep = server.SweepStale(s, time.Now(), c, remove)
		return remove, nil
	})
	return rep, err
}
