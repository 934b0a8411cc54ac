package bootstrap

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs up to 12 parallel tests at once, not GOMAXPROCS: the
// parallel ones are namespace labs waiting on carriers and ARP probe
// windows, next to no CPU, and two at a time queued seconds of idle
// waiting. Set before m.Run parses the command line, so -parallel given
// to go test still wins.
func TestMain(m *testing.M) {
	_ = flag.Set("test.parallel", "12")
	os.Exit(m.Run())
}
