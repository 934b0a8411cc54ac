package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/protocol"
)

func laughs(levels int, where string) []byte {
	var b strings.Builder
	b.WriteString("x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < levels; i++ {
		fmt.Fprintf(&b, "x%d: &a%d [", i, i)
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	fmt.Fprintf(&b, where, levels-1)
	return []byte(b.String())
}

func TestBL(t *testing.T) {
	for _, where := range []string{"config: {x: *a%d}\n", "cloud-config: {x: *a%d}\n", "elemental: {install: {config-urls: *a%d}}\n"} {
		for lv := 3; lv <= 7; lv++ {
			p := []byte("configurator: nmstate\n" + string(laughs(lv, where)))
			var cfg protocol.Config
			st := time.Now()
			_, err := protocol.DecodeConfigReply(p, &cfg)
			t.Logf("%q levels %d bytes %d: %v in %v", where, lv, len(p), err, time.Since(st))
		}
	}
}
