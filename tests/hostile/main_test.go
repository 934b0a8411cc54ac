package hostile

import (
	"flag"
	"os"
	"strconv"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

// waitingParallel is how many of this package's parallel tests run at
// once when -test.parallel is not given: they wait on the agent's bounds
// and silent servers, not on the CPU, so GOMAXPROCS (the default) would
// queue seconds of idle waiting behind each other.
const waitingParallel = 16

func TestMain(m *testing.M) {
	if name := os.Getenv(childEnv); name != "" {
		decodeChild(name)
	}
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(waitingParallel))
	}
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}
