package robust

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	long      = flag.Bool("robust.long", false, "run the long mode: many fault schedules, then print the figures")
	schedules = flag.Int("robust.schedules", 100, "fault schedules in the long mode")
	seed      = flag.Int64("robust.seed", 1, "the first schedule's seed")
	longFor   = flag.Duration("robust.for", 0, "in the long mode, start no schedule after this long (0: no limit)")
)

var binDir string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "djinn-robust")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var builds sync.Map // tags → *build

type build struct {
	once sync.Once
	path string
	err  error
}

// binary builds djinn once per set of build tags ("" for none).
func binary(t testing.TB, tags string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the djinn binary and runs clusters of it")
	}
	v, _ := builds.LoadOrStore(tags, &build{})
	b := v.(*build)
	b.once.Do(func() {
		b.path = filepath.Join(binDir, "djinn"+tags)
		args := []string{"build", "-o", b.path}
		if tags != "" {
			args = append(args, "-tags", tags)
		}
		out, err := exec.Command("go", append(args, "../../cmd/djinn")...).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build -tags %q: %v\n%s", tags, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}
