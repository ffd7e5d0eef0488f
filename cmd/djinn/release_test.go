package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The release files: the Dockerfile, the systemd unit, the LICENSE. No
// container engine runs here, so the Dockerfile's build stage is checked
// by running its go build line as it stands.

// dockerfileRuns returns the Dockerfile's RUN commands, continuation lines
// joined, and its other instructions by name.
func dockerfileRuns(t *testing.T) ([]string, map[string][]string) {
	t.Helper()
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	instr := map[string][]string{}
	var cur strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") && cur.Len() == 0 {
			continue
		}
		cont := strings.HasSuffix(line, "\\")
		cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
		if cont {
			continue
		}
		full := strings.TrimSpace(cur.String())
		cur.Reset()
		if full == "" {
			continue
		}
		name, rest, _ := strings.Cut(full, " ")
		instr[strings.ToUpper(name)] = append(instr[strings.ToUpper(name)], strings.TrimSpace(rest))
		if strings.ToUpper(name) == "RUN" {
			runs = append(runs, strings.TrimSpace(rest))
		}
	}
	return runs, instr
}

// TestDockerfileBuild runs the Dockerfile's go build line, as the build
// stage runs it in the build context (the repository, without .git, so
// the version comes from the build arguments), and checks what it built;
// and checks the image runs djinn serve as a user without privileges,
// with its data in a volume.
func TestDockerfileBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	runs, instr := dockerfileRuns(t)
	var build string
	for _, r := range runs {
		if strings.Contains(r, "go build") {
			build = r
		}
	}
	if build == "" {
		t.Fatal("the Dockerfile has no RUN … go build line")
	}
	out := filepath.Join(t.TempDir(), "djinn")
	dashO := regexp.MustCompile(`-o (\S+)`)
	if !dashO.MatchString(build) {
		t.Fatalf("the Dockerfile's build line names no output (-o): %s", build)
	}
	cmdline := dashO.ReplaceAllLiteralString(build, "-o "+out)
	cmd := exec.Command("sh", "-c", cmdline)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "VERSION=v9.8.7", "COMMIT=0123456789abcdef", "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's build line %q: %v\n%s", cmdline, err, b)
	}
	b, err := exec.Command(out, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("djinn version of the image's binary: %v", err)
	}
	var v versionView
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if v.Version != "v9.8.7" || v.Commit == nil || *v.Commit != "0123456789abcdef" || !strings.HasPrefix(v.GoVersion, "go") {
		t.Errorf("the image's djinn version says %s, want the version and commit of the build arguments", b)
	}
	if len(instr["FROM"]) < 2 {
		t.Errorf("the Dockerfile has %d stages, want a build stage and a small runtime one", len(instr["FROM"]))
	}
	user := instr["USER"]
	if len(user) == 0 || strings.HasPrefix(user[len(user)-1], "root") || strings.HasPrefix(user[len(user)-1], "0") {
		t.Errorf("the image runs as %v, want a user without privileges", user)
	}
	if len(instr["VOLUME"]) == 0 || !strings.Contains(strings.Join(instr["ENV"], " "), "DJINN_DATA_DIR="+instr["VOLUME"][0]) {
		t.Errorf("the image's data (ENV %v) is not in its volume (VOLUME %v)", instr["ENV"], instr["VOLUME"])
	}
}

// TestSystemdUnit checks the unit with systemd-analyze verify where it is
// installed, that it is hardened, and that djinn takes its command line.
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile("../../deploy/djinn.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{"DynamicUser=yes", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes",
		"PrivateTmp=yes", "CapabilityBoundingSet=\n", "SystemCallFilter=@system-service", "StateDirectory=djinn"} {
		if !strings.Contains(unit, want) {
			t.Errorf("deploy/djinn.service lacks %q", strings.TrimSpace(want))
		}
	}
	exec1 := regexp.MustCompile(`(?m)^ExecStart=(\S+) (.*)$`).FindStringSubmatch(unit)
	if exec1 == nil {
		t.Fatal("deploy/djinn.service has no ExecStart")
	}
	bin := djinnBinary(t)
	// djinn takes the unit's flags: serve with them and --help.
	args := append(strings.Fields(exec1[2]), "--help")
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Errorf("djinn %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("no systemd-analyze here: the unit is not verified")
		return
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "djinn.service")
	if err := os.WriteFile(path, []byte(strings.Replace(unit, "ExecStart="+exec1[1], "ExecStart="+bin, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sa, "verify", path).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify deploy/djinn.service: %v\n%s", err, out)
	}
}

// TestLicense: the Apache License 2.0, the djinn authors'.
func TestLicense(t *testing.T) {
	b, err := os.ReadFile("../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, "Apache License") || !strings.Contains(s, "Version 2.0, January 2004") || !strings.Contains(s, "Copyright 2026 the djinn authors") {
		t.Error("LICENSE is not the Apache License 2.0 of the djinn authors")
	}
}
