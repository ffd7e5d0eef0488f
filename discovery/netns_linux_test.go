package discovery

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// runInNetns runs this test binary again, with the same arguments, in a new
// network namespace, and returns its exit code. As root, `unshare --net`
// suffices; otherwise a user namespace maps the user to root inside, where
// the kernel allows unprivileged user namespaces.
func runInNetns() int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: finding the test binary to run in a network namespace: %v\n", err)
		return 1
	}
	flags := []string{"--net"}
	if os.Geteuid() != 0 {
		flags = append(flags, "--user", "--map-root-user")
	}
	if out, err := exec.Command("unshare", append(flags, "true")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the discovery tests need a private network namespace, where loopback can be given "+
			"multicast without changing the host's network, but `unshare %s true` failed: %v: %s\n"+
			"Run them as root, or where unprivileged user namespaces are allowed (util-linux unshare must be installed).\n",
			strings.Join(flags, " "), err, strings.TrimSpace(string(out)))
		return 1
	}
	cmd := exec.Command("unshare", append(append(flags, "--", exe), os.Args[1:]...)...)
	cmd.Env = append(os.Environ(), netnsEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// If go test kills this process (a timeout), the copy dies with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "FAIL: running the tests in a network namespace: %v\n", err)
		return 1
	}
}

// setupNetns configures the fresh namespace: loopback up and multicast,
// multicast routed to it, and a veth pair whose ends accept packets from
// this host's own addresses (both ends are here).
func setupNetns() error {
	steps := [][]string{
		{"ip", "link", "set", "lo", "up", "multicast", "on"},
		{"ip", "route", "add", "224.0.0.0/4", "dev", "lo"},
		{"ip", "link", "add", "dv0", "type", "veth", "peer", "name", "dv1"},
		{"ip", "addr", "add", "10.77.0.1/24", "dev", "dv0"},
		{"ip", "addr", "add", "10.77.0.2/24", "dev", "dv1"},
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	for _, dev := range []string{"all", "dv0", "dv1"} {
		if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+dev+"/accept_local", []byte("1"), 0o644); err != nil {
			return err
		}
	}
	for _, s := range [][]string{{"ip", "link", "set", "dv0", "up"}, {"ip", "link", "set", "dv1", "up"}} {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	for _, name := range []string{"lo", "dv0", "dv1"} {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return err
		}
		if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagMulticast == 0 {
			return fmt.Errorf("interface %s is not up with multicast (flags %v)", name, ifi.Flags)
		}
	}
	return nil
}
