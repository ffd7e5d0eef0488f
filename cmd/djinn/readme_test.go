package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/djinn-go/djinn/internal/testproxy"
)

// The README's shell examples run as pasted. TestREADME runs every ```sh
// block of README.md, in order, in one bash (the examples are bash or
// zsh), against a real server started as the quick start starts it, in a
// directory of its own (so djinn-data is where the examples expect it).
// Two things change on the way, and only these: the well-known ports
// (4160–4163, and 4170–4173 and 4261–4263 of the second servers) become
// free ones, DJINN_SERVER naming the first server's; and `go run
// ./cmd/djinn` is the djinn binary the tests built from the same source.
//
// The first block is the quick start, exactly two commands: the test does
// what it says itself — it starts the server, and it is the second
// command's run.
//
// A block that is not meant to run is fenced ```sh norun — a server that
// runs until interrupted, a download, a cluster of several machines — and
// there are at most readmeNoRun of them.

// readmeNoRun is the most blocks the README may keep from the test.
const readmeNoRun = 3

// readmeBlock is a fenced shell block of the README.
type readmeBlock struct {
	line  int // of its opening fence
	text  string
	noRun bool
}

// readmeBlocks returns the README's shell blocks.
func readmeBlocks(t *testing.T, md string) []readmeBlock {
	t.Helper()
	var (
		out []readmeBlock
		cur *readmeBlock
	)
	sc := bufio.NewScanner(strings.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur != nil && strings.HasPrefix(line, "```"):
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		case strings.HasPrefix(line, "```sh") || strings.HasPrefix(line, "```bash"):
			info := strings.Fields(strings.TrimPrefix(line, "```"))
			cur = &readmeBlock{line: n, noRun: len(info) > 1 && info[1] == "norun"}
			if len(info) > 1 && !cur.noRun {
				t.Errorf("README.md:%d: %q: a shell block is ```sh, or ```sh norun", n, line)
			}
		}
	}
	if cur != nil {
		t.Fatalf("README.md:%d: a shell block never ends", cur.line)
	}
	return out
}

// readmePorts are the README's well-known ports.
var readmePorts = regexp.MustCompile(`((?:127\.0\.0\.1|localhost):)(416[0-3]|417[0-3]|426[1-3])\b`)

func TestREADME(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(t, string(b))
	checkREADMEBlocks(t, blocks)
	dir := t.TempDir()
	ports := map[string]string{}
	script := readmeScript(t, blocks, ports)
	first := node{dir: filepath.Join(dir, "djinn-data"), listen: "127.0.0.1:" + ports["4161"], admin: "127.0.0.1:" + ports["4162"],
		raft: "127.0.0.1:" + ports["4163"], discovery: "127.0.0.1:" + ports["4160"]}
	p := first.start(t)
	defer p.stop(t)
	path := filepath.Join(dir, "readme.sh")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runREADME(t, dir, path, first.listen)
	if err != nil {
		t.Fatalf("the README's examples failed (%v); bash -x says, last lines:\n%s\n\nthe server said:\n%s", err, lastLines(out, 60), lastLines(p.output(), 20))
	}
	t.Logf("the README's examples ran; bash -x says, last lines:\n%s", lastLines(out, 15))
}

// checkREADMEBlocks checks what the README promises of its blocks: no
// placeholders, few kept from the test, the quick start exactly two
// commands, and the go install line naming this module.
func checkREADMEBlocks(t *testing.T, blocks []readmeBlock) {
	t.Helper()
	noRun := 0
	for _, bl := range blocks {
		if strings.Contains(bl.text, "…") {
			t.Errorf("README.md:%d: a shell example with a … placeholder cannot be pasted:\n%s", bl.line, bl.text)
		}
		if bl.noRun {
			noRun++
		}
	}
	if noRun > readmeNoRun {
		t.Errorf("%d README shell blocks are kept from the test (```sh norun), want at most %d", noRun, readmeNoRun)
	}
	if len(blocks) == 0 || commands(blocks[0].text) != "go run ./cmd/djinn serve\ngo test ./..." {
		t.Errorf("the README's first shell block is the quick start, exactly two commands; it is:\n%s", blocks[0].text)
	}
	checkQuickStartPorts(t)
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	module := strings.Fields(strings.SplitN(string(mod), "\n", 2)[0])[1]
	install := regexp.MustCompile(`go install (\S+)/cmd/djinn@`)
	found := false
	for _, bl := range blocks {
		for _, m := range install.FindAllStringSubmatch(bl.text, -1) {
			found = true
			if m[1] != module {
				t.Errorf("README.md:%d: go install %s/cmd/djinn, but the module is %s", bl.line, m[1], module)
			}
		}
	}
	if !found {
		t.Errorf("the README has no go install %s/cmd/djinn@VERSION line", module)
	}
}

// commands is a block's commands without their comments.
func commands(block string) string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		if i := strings.Index(l, "#"); i >= 0 {
			l = l[:i]
		}
		out = append(out, strings.TrimSpace(l))
	}
	return strings.Join(out, "\n")
}

// readmeScript joins the blocks to run, with free ports for the
// well-known ones (recorded in ports, by well-known port; the first
// server's are always there).
func readmeScript(t *testing.T, blocks []readmeBlock, ports map[string]string) string {
	t.Helper()
	// Ports below the ephemeral range (testproxy.FreeAddrs): an outgoing
	// connection of another test cannot take one before its server
	// listens; none is given twice.
	used := map[string]bool{}
	free := func() string {
		for {
			addrs, err := testproxy.FreeAddrs(1)
			if err != nil {
				t.Fatal(err)
			}
			_, port, err := net.SplitHostPort(addrs[0])
			if err != nil {
				t.Fatal(err)
			}
			if !used[port] {
				used[port] = true
				return port
			}
		}
	}
	for _, p := range []string{"4160", "4161", "4162", "4163"} {
		ports[p] = free()
	}
	var sb strings.Builder
	for _, bl := range blocks[1:] { // the quick start is the test's own doing
		if bl.noRun {
			continue
		}
		text := readmePorts.ReplaceAllStringFunc(bl.text, func(s string) string {
			m := readmePorts.FindStringSubmatch(s)
			if ports[m[2]] == "" {
				ports[m[2]] = free()
			}
			return m[1] + ports[m[2]]
		})
		text = strings.ReplaceAll(text, "go run ./cmd/djinn", "djinn")
		sb.WriteString("# README.md block at line " + strconv.Itoa(bl.line) + "\n" + text)
	}
	return sb.String()
}

// runREADME runs the script with bash -e -x in dir, with the djinn binary
// on the PATH and DJINN_SERVER naming server; whatever it left running
// is ended with it.
func runREADME(t *testing.T, dir, script, server string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-x", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(djinnBinary(t))+string(os.PathListSeparator)+os.Getenv("PATH"),
		"DJINN_SERVER="+server, "DJINN_JOIN_SECRET_FILE=", "DJINN_TLS_CA=", "DJINN_TLS_CERT=", "DJINN_TLS_KEY=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A file, not a pipe: the examples' background listeners hold it
	// until they are ended, after bash.
	out, err := os.Create(filepath.Join(dir, "readme.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // listeners and watchers the examples left in the background
	b, rerr := os.ReadFile(out.Name())
	if rerr != nil {
		t.Fatal(rerr)
	}
	return string(b), err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// checkQuickStartPorts: the README's quick start says how to change every
// port djinn serve listens on by default (each flag whose default is an
// address).
func checkQuickStartPorts(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(b), "## Quick start")
	quick, _, _ := strings.Cut(rest, "\n## ")
	addr := regexp.MustCompile(`^[0-9.]+:[0-9]+$`)
	n := 0
	newServe().Flags().VisitAll(func(f *pflag.Flag) {
		if !addr.MatchString(f.DefValue) {
			return
		}
		n++
		if !strings.Contains(quick, "`--"+f.Name+"`") {
			t.Errorf("the README's quick start does not say how to change serve's --%s (default %s)", f.Name, f.DefValue)
		}
	})
	if n < 4 {
		t.Errorf("serve has %d flags with an address by default, want at least 4 (listen, admin, raft, discovery)", n)
	}
}
