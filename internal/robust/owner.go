package robust

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Under TLS a Raft connection's first bytes are a TLS handshake, which
// names no member; the raft proxies then tell the sender by the process
// that owns the connecting socket (Linux's /proc): the member whose djinn
// process holds it.

// socketOwner returns the member among pids (pid → member id) whose
// process holds the TCP socket connected from local to remote, or "".
func socketOwner(local, remote net.Addr, pids map[int]string) string {
	inode := socketInode(local, remote)
	if inode == "" {
		return ""
	}
	want := "socket:[" + inode + "]"
	for pid, id := range pids {
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
		for _, fd := range fds {
			if l, err := os.Readlink(fd); err == nil && l == want {
				return id
			}
		}
	}
	return ""
}

// socketInode finds the inode of the IPv4 TCP socket whose local address
// is local and whose remote is remote in /proc/net/tcp.
func socketInode(local, remote net.Addr) string {
	lp, rp := port(local), port(remote)
	if lp == 0 || rp == 0 {
		return ""
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 || !hasPort(fs[1], lp) || !hasPort(fs[2], rp) {
			continue
		}
		return fs[9]
	}
	return ""
}

func port(a net.Addr) int {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.Port
	}
	return 0
}

// hasPort reports whether a /proc/net/tcp address (ADDR:PORT in hex) has
// port p.
func hasPort(field string, p int) bool {
	_, hex, ok := strings.Cut(field, ":")
	if !ok {
		return false
	}
	v, err := strconv.ParseUint(hex, 16, 32)
	return err == nil && int(v) == p
}
