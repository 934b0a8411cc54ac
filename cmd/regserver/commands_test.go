package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodereg/nodereg/server/store"
)

// store export refuses what is not a store it can read: exit 78 with one
// line naming the file, nothing on stdout, the file untouched.
func TestStoreExportRefuses(t *testing.T) {
	dir := t.TempDir()
	jsonStore := writeFile(t, filepath.Join(dir, "old.json"), `{"version":1,"inventories":{},"claims":[]}`+"\n")
	for name, c := range map[string]struct {
		path string
		says []string
	}{
		"missing":   {filepath.Join(dir, "nope.db"), []string{"nope.db", "does not exist"}},
		"JSON":      {jsonStore, []string{"old.json", "JSON store of an older regserver"}},
		"directory": {dir, []string{dir}},
	} {
		code, stdout, stderr := runCmd("store", "export", "--store", c.path)
		if code != exitConfig || stdout != "" || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", name, code, stdout, stderr)
			continue
		}
		for _, w := range c.says {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr %q does not contain %q", name, stderr, w)
			}
		}
	}
	if b, err := os.ReadFile(jsonStore); err != nil || !strings.HasPrefix(string(b), `{"version":1`) {
		t.Errorf("the JSON store changed: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nope.db")); err == nil {
		t.Error("store export created the missing store")
	}
}

// flagTable is the flag table of docs/regserver.md's section whose heading
// contains heading: flag name -> default column.
func flagTable(t *testing.T, doc, heading string) map[string]string {
	t.Helper()
	var section []string
	in := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "##") { // not the comments in code blocks
			if in {
				break
			}
			in = strings.Contains(line, heading)
			continue
		}
		if in {
			section = append(section, line)
		}
	}
	if !in {
		t.Fatalf("docs/regserver.md has no section %q", heading)
	}
	rows := map[string]string{}
	rowRE := regexp.MustCompile("(?m)^\\| `--([a-z-]+)[^|]*\\|([^|]*)\\|")
	for _, m := range rowRE.FindAllStringSubmatch(strings.Join(section, "\n"), -1) {
		rows[m[1]] = strings.TrimSpace(m[2])
	}
	if len(rows) == 0 {
		t.Fatalf("docs/regserver.md's section %q has no flag table", heading)
	}
	return rows
}

// docs/regserver.md's flag tables and --help agree on every flag and
// default, for the server and for each subcommand with flags; the docs
// list every command.
func TestDocsAgreeWithHelp(t *testing.T) {
	b, err := os.ReadFile("../../docs/regserver.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	root := command(context.Background(), io.Discard, io.Discard)
	root.InitDefaultCompletionCmd()
	root.InitDefaultHelpCmd()
	export, _, err := root.Find([]string{"store", "export"})
	if err != nil {
		t.Fatal(err)
	}
	prune, _, err := root.Find([]string{"store", "prune"})
	if err != nil {
		t.Fatal(err)
	}
	for heading, cmd := range map[string]*cobra.Command{"## Running": root, "`regserver store export": export, "`regserver store prune": prune} {
		rows := flagTable(t, doc, heading)
		cmd.LocalNonPersistentFlags().VisitAll(func(fl *pflag.Flag) {
			col, ok := rows[fl.Name]
			switch {
			case !ok:
				t.Errorf("%s --%s is not in docs/regserver.md's flag table", cmd.CommandPath(), fl.Name)
			case fl.DefValue == "" || fl.DefValue == "false" && col == "false":
			case col != "`"+fl.DefValue+"`":
				t.Errorf("%s --%s: docs say default %s, --help says %q", cmd.CommandPath(), fl.Name, col, fl.DefValue)
			}
			delete(rows, fl.Name)
		})
		for name := range rows {
			t.Errorf("docs/regserver.md lists %s --%s, which regserver does not have", cmd.CommandPath(), name)
		}
	}
	i := strings.Index(doc, "## Commands")
	if i < 0 {
		t.Fatal("docs/regserver.md has no Commands section")
	}
	commands := doc[i:]
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		// A line of the synopsis block, or named in the text.
		if !strings.Contains(commands, "\n"+c.CommandPath()+" ") && !strings.Contains(commands, "`"+c.CommandPath()) {
			t.Errorf("docs/regserver.md's Commands section does not list %s", c.CommandPath())
		}
		if c.Name() == "completion" {
			return // one per shell, cobra's own
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// store prune lists, then removes, the inventories that never got an
// address or were not seen for the given time, and reports them.
func TestStorePrune(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-3 * time.Hour)
	err = st.Update(func(s *store.State) (bool, error) {
		for _, inv := range []struct {
			name, addr string
			at         time.Time
		}{{"m-fake", "", old}, {"m-real", "10.0.0.5", old}, {"m-new", "", time.Now()}} {
			s.PutInventory(&store.Inventory{Name: inv.name, Hash: "h-" + inv.name, CreatedAt: inv.at, UpdatedAt: inv.at})
			s.AddClaim(&store.Claim{Name: inv.name + "-ip", Inventory: "h-" + inv.name, IPName: "ip", Pool: "p", Address: inv.addr})
		}
		return true, nil
	})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCmd("store", "prune", "--store", path, "--unaddressed", "1h")
	if code != 0 || !strings.Contains(out, `"name": "m-fake"`) || strings.Contains(out, "m-real") || strings.Contains(out, "m-new") || !strings.Contains(out, `"removed": false`) {
		t.Fatalf("list: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = runCmd("store", "prune", "--store", path, "--unseen", "2h", "--remove")
	if code != 0 || !strings.Contains(out, `"count": 2`) || !strings.Contains(out, `"releasedAddresses": 1`) || !strings.Contains(out, `"removed": true`) {
		t.Fatalf("remove: exit %d\n%s%s", code, out, stderr)
	}
	code, out, _ = runCmd("store", "export", "--store", path)
	if code != 0 || strings.Contains(out, "m-fake") || strings.Contains(out, "m-real") || !strings.Contains(out, "m-new") {
		t.Fatalf("after prune: exit %d\n%s", code, out)
	}
	if code, _, stderr := runCmd("store", "prune", "--store", path); code != 64 || !strings.Contains(stderr, "--unaddressed") {
		t.Fatalf("no criteria: exit %d %s", code, stderr)
	}
}
