package robust

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/djinn-go/djinn/internal/testproxy"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Cluster is a cluster of real djinn serve processes, each port behind a
// Proxy of one Net: clients dial a member's client proxy, the members
// reach each other's gRPC through its peer proxy (its advertised address)
// and its Raft port through its raft proxy (its advertised Raft address).
type Cluster struct {
	Bin   string // the djinn binary
	Dir   string // data directories live under it
	Net   *Net
	Nodes []*Node
	// Certs is the cluster's mutual TLS: every member requires client
	// certificates, and clients call as one of the principals.
	Certs *Certs
	// Extra flags for every djinn serve.
	Extra []string
}

// Node is one member: its data directory, ports and proxies, and its
// process while it runs.
type Node struct {
	ID                string
	dir               string
	listen, raft      string // real addresses
	client, peer, rft *Proxy
	c                 *Cluster

	mu     sync.Mutex
	cmd    *exec.Cmd                    // guarded by mu; nil while down
	out    *output                      // guarded by mu
	conns  [principals]*grpc.ClientConn // the client proxy, by principal, guarded by mu
	direct *grpc.ClientConn             // the real port, for the suite's own questions
}

type output struct{ strings.Builder }

// ClientAddr is the address clients dial to reach the node.
func (n *Node) ClientAddr() string { return n.client.Addr() }

// freePort returns a loopback address no one listens on now.
func freePort() (string, error) {
	addrs, err := testproxy.FreeAddrs(1)
	if err != nil {
		return "", err
	}
	return addrs[0], nil
}

// NewCluster creates n nodes' directories and proxies, the nodes serving
// under certs' mutual TLS; Start starts them.
func NewCluster(bin, dir string, n int, certs *Certs) (*Cluster, error) {
	c := &Cluster{Bin: bin, Dir: dir, Net: NewNet(), Certs: certs}
	c.Net.Processes(c.pids)
	for i := range n {
		node := &Node{ID: memberID(i), c: c}
		node.dir = filepath.Join(dir, node.ID)
		var err error
		if node.listen, err = freePort(); err != nil {
			return nil, err
		}
		if node.raft, err = freePort(); err != nil {
			return nil, err
		}
		c.Net.Member(node.ID)
		if node.client, err = c.Net.Listen(node.ID, Clients, false); err != nil {
			return nil, err
		}
		if node.peer, err = c.Net.Listen(node.ID, Peers, false); err != nil {
			return nil, err
		}
		if node.rft, err = c.Net.Listen(node.ID, Peers, true); err != nil {
			return nil, err
		}
		node.client.Target(node.listen)
		node.peer.Target(node.listen)
		node.rft.Target(node.raft)
		c.Nodes = append(c.Nodes, node)
	}
	return c, nil
}

// pids returns the running members' processes: pid → member id.
func (c *Cluster) pids() map[int]string {
	out := map[int]string{}
	for _, n := range c.Nodes {
		n.mu.Lock()
		if n.cmd != nil && n.cmd.Process != nil {
			out[n.cmd.Process.Pid] = n.ID
		}
		n.mu.Unlock()
	}
	return out
}

// Start starts the first node, which forms the cluster, then the others,
// which join it with their peer certificates.
func (c *Cluster) Start(ctx context.Context) error {
	for i, n := range c.Nodes {
		var join []string
		if i > 0 {
			join = []string{"--join", c.Nodes[0].peer.Addr()}
		}
		if err := n.Start(ctx, join...); err != nil {
			return err
		}
	}
	return c.WaitVoters(ctx)
}

// WaitVoters waits until a leader reports every node a healthy voter.
func (c *Cluster) WaitVoters(ctx context.Context) error {
	return poll(ctx, "every member a voter", func() bool {
		for _, n := range c.Nodes {
			ms, err := djinnpb.NewAdminClient(n.Direct()).Members(ctx, &djinnpb.MembersRequest{})
			if err != nil || ms.LeaderId == "" || len(ms.Members) != len(c.Nodes) {
				continue
			}
			voters := 0
			for _, m := range ms.Members {
				if m.Voter {
					voters++
				}
			}
			if voters == len(c.Nodes) {
				return true
			}
		}
		return false
	})
}

// robustConfig is every member's configuration: no lookup joining, and
// snapshots taken often (every 1–2 s once 256 entries are new) keeping
// only 64 entries behind them in small log segments (compaction removes
// whole segments), so that the runs write, restart from and send many
// of them.
const robustConfig = `[lookup-join]
enabled = false

[raft-tuning]
snapshot-interval = "1s"
snapshot-threshold = 256
trailing-logs = 64
wal-segment-size = 65536
`

// Start runs djinn serve for the node and waits until it says it serves;
// a process that exits first is an error carrying what it printed (why
// it refused to start).
func (n *Node) Start(ctx context.Context, extra ...string) error {
	if err := os.MkdirAll(n.dir, 0o700); err != nil {
		return err
	}
	cfg := filepath.Join(n.c.Dir, "robust.toml")
	if err := os.WriteFile(cfg, []byte(robustConfig), 0o600); err != nil {
		return err
	}
	args := append([]string{"serve", "--config", cfg, "--data-dir", n.dir, "--node-id", n.ID,
		"--listen", n.listen, "--advertise", n.peer.Addr(), "--admin", "127.0.0.1:0",
		"--raft", n.raft, "--raft-advertise", n.rft.Addr(), "--discovery", "",
		"--log-level", "warn"}, n.c.Certs.serveFlags(n.ID)...)
	args = append(args, n.c.Extra...)
	cmd := exec.Command(n.c.Bin, append(args, extra...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	out := &output{}
	cmd.Stderr = &lockedWriter{mu: &n.mu, w: out}
	if err := cmd.Start(); err != nil {
		return err
	}
	n.mu.Lock()
	n.cmd, n.out = cmd, out
	n.mu.Unlock()
	ready, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			n.mu.Lock()
			out.WriteString(sc.Text() + "\n")
			n.mu.Unlock()
			if strings.HasPrefix(sc.Text(), "djinn serving") {
				once.Do(func() { close(ready) })
			}
		}
	}()
	select {
	case <-ready:
		return nil
	case <-exited:
		n.Kill()
		return fmt.Errorf("%w: %s exited before serving:\n%s", ErrRefused, n.ID, n.Output())
	case <-ctx.Done():
		n.Kill()
		return fmt.Errorf("%s did not start: %w\n%s", n.ID, ctx.Err(), n.Output())
	}
}

// ErrRefused is a member's process exiting before it serves: it refused
// to start (its output says why).
var ErrRefused = errors.New("refused to start")

type lockedWriter struct {
	mu *sync.Mutex
	w  *output
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}

// Output is what the node's current process printed.
func (n *Node) Output() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.out == nil {
		return ""
	}
	return n.out.String()
}

// Up reports whether the node's process runs.
func (n *Node) Up() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Kill sends SIGKILL and waits for the process: no shutdown code runs.
func (n *Node) Kill() {
	n.mu.Lock()
	cmd := n.cmd
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// Freeze stops the node's process (SIGSTOP) where it is, as a long pause
// of its machine would: it neither answers nor notices time passing until
// Thaw, and then carries on believing what it believed.
func (n *Node) Freeze() { n.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen node's process (SIGCONT).
func (n *Node) Thaw() { n.signal(syscall.SIGCONT) }

func (n *Node) signal(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		_ = n.cmd.Process.Signal(sig)
	}
}

// Stop sends SIGTERM and waits for the process to exit.
func (n *Node) Stop() error {
	n.mu.Lock()
	cmd := n.cmd
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("%s exited with %v after SIGTERM:\n%s", n.ID, err, n.Output())
	}
	return nil
}

// Conn is p's connection through the node's client proxy.
func (n *Node) Conn(p Principal) *grpc.ClientConn {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conns[p] == nil {
		n.conns[p] = dial(n.client.Addr(), n.c.Certs.clients[p])
	}
	return n.conns[p]
}

// Direct is Alice's connection to the node's real port, bypassing the
// network the faults are injected into: the suite asks members who leads
// there.
func (n *Node) Direct() *grpc.ClientConn {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.direct == nil {
		n.direct = dial(n.listen, n.c.Certs.clients[Alice])
	}
	return n.direct
}

func dial(addr string, tc *tls.Config) *grpc.ClientConn {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		panic(fmt.Sprintf("grpc.NewClient(%q): %v", addr, err)) // only for a malformed address
	}
	return cc
}

// Leader returns the node that says it leads and that a majority of the
// members name as leader, or nil.
func (c *Cluster) Leader(ctx context.Context) *Node {
	votes := map[string]int{}
	leads := map[string]bool{}
	for _, n := range c.Nodes {
		if !n.Up() {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := djinnpb.NewAdminClient(n.Direct()).Status(cctx, &djinnpb.StatusRequest{})
		cancel()
		if err == nil && st.LeaderId != "" {
			votes[st.LeaderId]++
			leads[n.ID] = leads[n.ID] || st.State == "Leader" && st.LeaderId == n.ID
		}
	}
	for _, n := range c.Nodes {
		if leads[n.ID] && votes[n.ID] > len(c.Nodes)/2 {
			return n
		}
	}
	return nil
}

// WaitLeader waits for a leader that every running, connected member
// agrees on.
func (c *Cluster) WaitLeader(ctx context.Context) (*Node, error) {
	var l *Node
	err := poll(ctx, "a leader", func() bool {
		l = c.Leader(ctx)
		return l != nil
	})
	return l, err
}

// Close kills every process and closes the network and connections.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Kill()
		n.mu.Lock()
		for _, cc := range append(n.conns[:], n.direct) {
			if cc != nil {
				cc.Close()
			}
		}
		n.conns, n.direct = [principals]*grpc.ClientConn{}, nil
		n.mu.Unlock()
	}
	c.Net.Close()
}

// poll checks cond every 20ms until it holds or ctx ends.
func poll(ctx context.Context, what string, cond func() bool) error {
	for {
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waited for %s: %w", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
