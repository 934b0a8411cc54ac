package yipschema

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/mudler/yip/pkg/schema"
	"gopkg.in/yaml.v3"
)

// The configs the agent writes encode byte for byte as yip's own types
// do, and yip's encoding of a config decodes to the same files here.
func TestEncodesAsYipSchema(t *testing.T) {
	ours := Config{Name: "Elemental Finalize System", Stages: map[string][]Stage{
		"initramfs": {
			{Name: "a", If: "[ ! -f /x ]", Directories: []Directory{{Path: "/d", Permissions: 0o700}},
				Files: []File{{Path: "/d/f", Permissions: 0o600, Content: "line 1\n{{ \"{{\" }}\n"}}},
			{Name: "b", Files: []File{{Path: "/g", Permissions: 0o644, Owner: 1, Group: 2, Encoding: "b64", OwnerString: "u:g"}}},
		},
		"before-install": {{Name: "only a name"}},
	}}
	yips := schema.YipConfig{Name: ours.Name, Stages: map[string][]schema.Stage{}}
	for stage, steps := range ours.Stages {
		for _, st := range steps {
			ys := schema.Stage{Name: st.Name, If: st.If}
			for _, f := range st.Files {
				ys.Files = append(ys.Files, schema.File{Path: f.Path, Permissions: f.Permissions, Owner: f.Owner, Group: f.Group,
					Content: f.Content, Encoding: f.Encoding, OwnerString: f.OwnerString})
			}
			for _, d := range st.Directories {
				ys.Directories = append(ys.Directories, schema.Directory{Path: d.Path, Permissions: d.Permissions, Owner: d.Owner, Group: d.Group})
			}
			yips.Stages[stage] = append(yips.Stages[stage], ys)
		}
	}
	for _, indent := range []int{2, 4} {
		enc := func(v any) []byte {
			var b bytes.Buffer
			e := yaml.NewEncoder(&b)
			e.SetIndent(indent)
			if err := e.Encode(v); err != nil {
				t.Fatal(err)
			}
			return b.Bytes()
		}
		got, want := enc(&ours), enc(&yips)
		if !bytes.Equal(got, want) {
			t.Errorf("indent %d:\nours\n%s\nyip\n%s", indent, got, want)
		}
		var back Config
		if err := yaml.Unmarshal(want, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, ours) {
			t.Errorf("yip's encoding decodes to %+v, want %+v", back, ours)
		}
	}
	var empty Config
	if got, want := mustMarshal(t, &empty), mustMarshal(t, &schema.YipConfig{}); !bytes.Equal(got, want) {
		t.Errorf("empty config: ours %q, yip %q", got, want)
	}
}

// A yip file with fields the agent does not model (commands, users, a
// download) still decodes: its files are read, the rest ignored, as
// decoding it into yip's own types and keeping the files would.
func TestDecodesForeignYip(t *testing.T) {
	src := []byte(`name: other
stages:
  boot:
    - name: s
      commands: [echo hi]
      users: {bar: {passwd: x}}
      downloads: [{path: /dl, url: "http://192.0.2.1/x"}]
      files:
        - path: /etc/a
          permissions: 420
          content: a
        - path: /etc/b
`)
	var ours Config
	if err := yaml.Unmarshal(src, &ours); err != nil {
		t.Fatal(err)
	}
	var yips schema.YipConfig
	if err := yaml.Unmarshal(src, &yips); err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, st := range ours.Stages["boot"] {
		for _, f := range st.Files {
			got = append(got, f.Path)
		}
	}
	for _, st := range yips.Stages["boot"] {
		for _, f := range st.Files {
			want = append(want, f.Path)
		}
	}
	if !reflect.DeepEqual(got, want) || len(got) != 2 {
		t.Errorf("files %v, yip %v", got, want)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
