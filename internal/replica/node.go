package replica

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/disk"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Config configures a Node.
type Config struct {
	// DataDir holds the log, the snapshots and the node id.
	DataDir string
	// NodeID names this member; empty: the id stored in DataDir, or a new
	// random one on first start.
	NodeID string
	// RaftAddr is the address the Raft transport listens on.
	RaftAddr string
	// AdvertiseRaft is the address peers dial; empty: the bound address.
	AdvertiseRaft string
	// TLS, when set, secures the peer port (mutual TLS if it asks for client
	// certificates).
	TLS *tls.Config
	// DialTLS, with TLS, makes the configuration of each connection this
	// node dials (certificates renewed while it runs); nil: TLS's.
	DialTLS func() *tls.Config
	// Secret, without TLS, is the cluster's join secret: the peer port
	// takes only connections whose dialer proves it holds it, and this
	// node proves it to the members it dials (secretstream.go). Nil, and
	// no TLS: the port takes any connection (tests of this package).
	Secret []byte
	// HandshakeTimeout bounds a peer connection's TLS handshake (or its
	// proof of the secret); one that takes longer is closed. Default 10s.
	HandshakeTimeout time.Duration
	// Bootstrap makes a node with no state the single voter of a new
	// cluster. A node that will join an existing cluster leaves it false.
	Bootstrap bool
	// Now is the clock that stamps proposed commands; nil: time.Now.
	Now func() time.Time
	// RiderDelay bounds how long a rider (ProposeRider) waits for another
	// proposal's log entry before it is appended alone; default 5ms.
	RiderDelay time.Duration
	// OnLeader runs leader-only work: called in its own goroutine each time
	// this node becomes leader, after a barrier, with a context cancelled
	// when leadership ends. The node waits for it to return before it runs
	// it again or closes.
	OnLeader func(ctx context.Context)
	// Endpoint maps a node id to its gRPC address, for leader hints.
	Endpoint func(nodeID string) string
	// Logger receives the node's structured logs, Raft's among them.
	Logger *slog.Logger
	// OnLogWrite, when set, hears of every write to the log (an append
	// and its fsync): how long it took and its error. It must not block.
	OnLogWrite func(d time.Duration, err error)

	// Timing; zero values take defaults suited to a LAN or loopback.
	HeartbeatTimeout  time.Duration // default 500ms
	ElectionTimeout   time.Duration // default 500ms
	SnapshotInterval  time.Duration // default 30s
	SnapshotThreshold uint64        // default 65536 entries
	TrailingLogs      uint64        // entries kept behind a snapshot; default 16384
	WALSegmentSize    int           // bytes; default 64 MiB

	// wrapLogs, in tests, stands between raft and the log it writes;
	// wrapStable between raft and its stable store.
	wrapLogs   func(raft.LogStore) raft.LogStore
	wrapStable func(raft.StableStore) raft.StableStore
	// onDrain, in tests, runs when Close begins to wait for the
	// transport's connection handlers.
	onDrain func()
	// onTransfer, in tests, runs just before a leadership transfer starts.
	onTransfer func()
}

// Node is one member of a djinn cluster.
type Node struct {
	cfg   Config
	id    string
	raft  *raft.Raft
	dir   string // the raft directory in DataDir
	log   *wal.WAL
	snaps *snapStore
	trans *raft.NetworkTransport
	conns *trackedStream // the transport's accepted connections
	notes chan bool
	logs  *failStop  // the log as raft writes it
	end   *logEnd    // the log-end record (logend.go)
	term  *termStore // raft's stable store: the log's, and the term record (termvote.go)

	proposer *proposer
	lease    *leaderLease // valid while a quorum recently confirmed this node leads

	applied atomic.Uint64
	// leading is set while this node leads and has applied its term's
	// first entry (the barrier OnLeader waits for).
	leading atomic.Bool

	// Waiters for the applied index: WaitApplied counts itself in waiting
	// and waits for advanced, which appliedTo closes and replaces.
	waiting  atomic.Int32
	waitMu   sync.Mutex
	advanced chan struct{} // guarded by waitMu

	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex // guards closed
	// closed is set by Close; shut is closed once Close is done.
	closed bool
	shut   chan struct{}
}

// ElectionTimeout returns the election timeout in force: a new leader
// extends every lease by it before expiring any (DESIGN.md section 2).
func (n *Node) ElectionTimeout() time.Duration { return n.cfg.ElectionTimeout }

// Open starts a node on cfg.DataDir, bootstrapping a one-voter cluster on
// first start when cfg.Bootstrap is set.
func Open(cfg Config, sm StateMachine) (*Node, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HeartbeatTimeout == 0 {
		cfg.HeartbeatTimeout = 500 * time.Millisecond
	}
	if cfg.ElectionTimeout == 0 {
		cfg.ElectionTimeout = 500 * time.Millisecond
	}
	if cfg.SnapshotInterval == 0 {
		cfg.SnapshotInterval = 30 * time.Second
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = 65536
	}
	if cfg.TrailingLogs == 0 {
		cfg.TrailingLogs = 16384
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	if cfg.WALSegmentSize == 0 {
		cfg.WALSegmentSize = wal.DefaultSegmentSize
	}
	if cfg.RiderDelay == 0 {
		cfg.RiderDelay = defaultRiderDelay
	}
	dir := filepath.Join(cfg.DataDir, "raft")
	if err := os.MkdirAll(filepath.Join(dir, "wal"), 0o700); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", cfg.DataDir, err)
	}
	ident, err := readIdentity(cfg.DataDir, cfg.NodeID)
	if err != nil {
		return nil, err
	}
	id := ident.id
	n := &Node{cfg: cfg, id: id, dir: dir, notes: make(chan bool, 16), advanced: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}), shut: make(chan struct{})}
	n.lease = newLeaderLease(leaseBound(cfg.HeartbeatTimeout), time.Now())

	hlog := newRaftLog(cfg.Logger, "raft")
	hlog.demote = routine
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(id)
	rc.Logger = hlog
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.HeartbeatTimeout / 2
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.MaxAppendEntries = 512
	rc.BatchApplyCh = true
	rc.NotifyCh = n.notes
	rc.NoLegacyTelemetry = true // per-follower figures as labels, not names

	st, err := openStorage(dir, cfg.WALSegmentSize, hlog, cfg.Logger)
	if err != nil {
		return nil, disk.WithRecovery(fmt.Errorf("data directory %s: %w", cfg.DataDir, err), recovery(cfg.DataDir))
	}
	n.log, n.snaps, n.end, n.term = st.log, st.snaps, st.end, st.term
	n.trans, n.conns, err = newTransport(cfg, hlog)
	if err != nil {
		n.closeStores()
		return nil, err
	}
	exists, err := raft.HasExistingState(n.log, n.log, n.snaps)
	if err != nil {
		n.closeStores()
		return nil, fmt.Errorf("read state in %s: %w", dir, err)
	}
	if err := n.checkIdentity(ident, exists); err != nil {
		n.closeStores()
		return nil, err
	}
	var stable raft.StableStore = n.term
	if !exists && cfg.Bootstrap {
		conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: rc.LocalID, Address: n.trans.LocalAddr()}}}
		if err := raft.BootstrapCluster(rc, n.log, stable, n.snaps, n.trans, conf); err != nil {
			n.closeStores()
			return nil, fmt.Errorf("bootstrap cluster: %w", err)
		}
	}
	var logs raft.LogStore = n.log
	if cfg.wrapLogs != nil {
		logs = cfg.wrapLogs(logs)
	}
	n.logs = newFailStop(logs, cfg.OnLogWrite)
	n.logs.dir = cfg.DataDir
	n.logs.end = n.end
	n.end.start(n.logs.fail)
	if cfg.wrapStable != nil {
		stable = cfg.wrapStable(stable)
	}
	if exists {
		// A member that restarts forgets the leader it heard from, and
		// would vote at once: it waits until a leader lease it may have
		// confirmed before it stopped is over (leaderlease.go).
		time.Sleep(cfg.HeartbeatTimeout)
	}
	f := &fsm{sm: sm, applied: n.appliedTo}
	n.raft, err = raft.NewRaft(rc, f, n.logs, stable, n.snaps, n.trans)
	if err != nil {
		n.closeStores()
		if r := f.lastRestoreErr(); IsRefusal(r) {
			// No damage: a newer binary reads this data directory.
			return nil, fmt.Errorf("data directory %s: %w", cfg.DataDir, r)
		}
		if why := st.restoreFailure(dir, f.lastRestoreErr()); why != nil {
			err = why
		}
		return nil, disk.WithRecovery(fmt.Errorf("data directory %s: start raft: %w", cfg.DataDir, err), recovery(cfg.DataDir))
	}
	n.proposer = newProposer(n.raft, n.raftError, cfg.RiderDelay)
	f.proposer.Store(n.proposer)
	go n.watchLeadership()
	return n, nil
}

func newTransport(cfg Config, hlog hclog.Logger) (*raft.NetworkTransport, *trackedStream, error) {
	var adv net.Addr
	if cfg.AdvertiseRaft != "" {
		a, err := net.ResolveTCPAddr("tcp", cfg.AdvertiseRaft)
		if err != nil {
			return nil, nil, djinn.Errorf(djinn.InvalidArgument, "raft advertise address %q: %v", cfg.AdvertiseRaft, err)
		}
		adv = a
	}
	ln, err := net.Listen("tcp", cfg.RaftAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("raft address %s: %w", cfg.RaftAddr, err)
	}
	if adv == nil {
		adv = ln.Addr()
	}
	var stream raft.StreamLayer
	if cfg.TLS != nil {
		dial := cfg.DialTLS
		if dial == nil {
			dial = func() *tls.Config { return cfg.TLS }
		}
		stream = &tlsStream{Listener: tls.NewListener(ln, cfg.TLS), advertise: adv, config: dial, handshake: cfg.HandshakeTimeout}
	} else if len(cfg.Secret) > 0 {
		stream = &secretStream{Listener: ln, advertise: adv, secret: cfg.Secret, handshake: cfg.HandshakeTimeout}
	} else {
		stream = &tcpStream{Listener: ln, advertise: adv}
	}
	tracked := newTrackedStream(stream)
	tracked.strangers = &strangers{log: cfg.Logger, now: cfg.Now}
	if cfg.onDrain != nil {
		tracked.onDrain = cfg.onDrain
	}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: tracked, MaxPool: 4, Timeout: 10 * time.Second, Logger: hlog,
	}), tracked, nil
}

type tcpStream struct {
	net.Listener
	advertise net.Addr
}

func (t *tcpStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

func (t *tcpStream) Addr() net.Addr { return t.advertise }

// checkIdentity refuses to start under an id that is not this node's
// (identity.go), warns when the log's configuration does not have it, and
// keeps the id in the node-id file.
func (n *Node) checkIdentity(ident identity, exists bool) error {
	var conf raft.Configuration
	if exists {
		var err error
		if conf, err = latestConfiguration(n.log, n.snaps); err != nil {
			return fmt.Errorf("data directory %s: read the cluster configuration: %w", n.cfg.DataDir, err)
		}
	}
	if err := ident.check(conf, n.trans.LocalAddr()); err != nil {
		return err
	}
	if ident.outside(conf) {
		ident.warnOutside(n.cfg.Logger, conf, n.trans.LocalAddr())
	}
	return ident.keep(n.cfg.Logger)
}

// ID returns the node's id.
func (n *Node) ID() string { return n.id }

// RaftAddr returns the address peers reach this node's Raft transport at.
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// watchLeadership runs OnLeader for each term this node leads.
func (n *Node) watchLeadership() {
	defer close(n.done)
	var (
		cancel context.CancelFunc
		term   chan struct{}
	)
	end := func() {
		if cancel != nil {
			cancel()
			<-term
			cancel, term = nil, nil
		}
		n.leading.Store(false) // after the term's goroutine is done
		n.lease.revoke()
	}
	defer end()
	for {
		select {
		case <-n.stop:
			return
		case leader := <-n.notes:
			end()
			if !leader {
				n.cfg.Logger.Info("leadership lost", "node", n.id)
				continue
			}
			ctx, stopTerm := context.WithCancel(context.Background())
			cancel = stopTerm
			term = make(chan struct{})
			go func(ctx context.Context, term chan struct{}) {
				defer close(term)
				if err := n.raft.Barrier(0).Error(); err != nil {
					return
				}
				if ctx.Err() != nil {
					return
				}
				n.leading.Store(true)
				n.cfg.Logger.Info("leading", "node", n.id)
				leased := make(chan struct{})
				go func() {
					defer close(leased)
					n.lease.run(ctx, n.barrier, time.Now)
				}()
				if n.cfg.OnLeader != nil {
					n.cfg.OnLeader(ctx)
				}
				<-leased
			}(ctx, term)
		}
	}
}

// Propose appends cmd to the log, waits until it is applied on this node,
// and returns the state machine's result. It stamps cmd with the node's
// clock unless cmd already carries a time. Commands proposed concurrently
// share log entries (propose.go). cmd is the node's from then on: the
// caller must not change it, and the state machine may keep parts of it.
func (n *Node) Propose(ctx context.Context, cmd *statepb.Command) (any, error) {
	return n.propose(ctx, cmd, false)
}

// ProposeRider is Propose for a command that need not be written at once:
// it rides in the log entry of the next command proposed, or is appended
// alone once it has waited RiderDelay with none (propose.go). It saves
// its own append and fsync; its caller still waits until it is applied.
func (n *Node) ProposeRider(ctx context.Context, cmd *statepb.Command) (any, error) {
	return n.propose(ctx, cmd, true)
}

func (n *Node) propose(ctx context.Context, cmd *statepb.Command, rider bool) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(err, djinn.Errorf(djinn.Unavailable, "gave up before proposing: the change was not made"))
	}
	if !n.IsLeader() {
		return nil, &NotLeaderError{Leader: n.LeaderEndpoint()}
	}
	if cmd.NowUnixNanos == 0 {
		cmd.NowUnixNanos = n.cfg.Now().UnixNano()
	}
	return n.proposer.propose(ctx, cmd, rider)
}

// NotLeaderError says this node is not the leader; Leader is the leader's
// gRPC address when known. Its kind is Unavailable.
type NotLeaderError struct{ Leader string }

func (e *NotLeaderError) Error() string {
	if e.Leader == "" {
		return "not the leader and no leader is known"
	}
	return "not the leader: the leader serves at " + e.Leader
}

// Unwrap gives the error its kind.
func (e *NotLeaderError) Unwrap() error { return djinn.ErrUnavailable }

func (n *Node) raftError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return &NotLeaderError{Leader: n.LeaderEndpoint()}
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return djinn.Errorf(djinn.Unavailable, "leadership lost: the change may or may not have been made")
	case errors.Is(err, raft.ErrRaftShutdown):
		return djinn.Errorf(djinn.Unavailable, "server shutting down")
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return djinn.Errorf(djinn.Unavailable, "log busy: the change was not made")
	}
	return djinn.Errorf(djinn.Unavailable, "replicate: %v", err)
}

// IsLeader reports whether this node believes it leads.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// CheckLeader returns nil on the leader and a NotLeaderError elsewhere.
func (n *Node) CheckLeader() error {
	if n.IsLeader() {
		return nil
	}
	return &NotLeaderError{Leader: n.LeaderEndpoint()}
}

// LeaderLease reports whether this node leads and holds a valid leader
// lease: no other member can have been elected since a quorum last
// confirmed it leads (leaderlease.go), so it may answer from its own state
// as the leader. It costs no round trip; on false, confirm with
// VerifyLeader. Safe for concurrent use.
func (n *Node) LeaderLease() bool { return n.IsLeader() && n.lease.valid(time.Now()) }

// barrier commits an entry in this node's term, confirming the leader
// lease (leaderlease.go).
func (n *Node) barrier() error { return n.raft.Barrier(n.cfg.HeartbeatTimeout).Error() }

// VerifyLeader confirms with a quorum that this node still leads.
func (n *Node) VerifyLeader() error {
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return n.raftError(err)
	}
	return nil
}

// Leader returns the leader's node id and Raft address, empty when unknown.
func (n *Node) Leader() (id, raftAddr string) {
	addr, sid := n.raft.LeaderWithID()
	return string(sid), string(addr)
}

// LeaderEndpoint returns the leader's gRPC address, empty when unknown.
func (n *Node) LeaderEndpoint() string {
	id, _ := n.Leader()
	if id == "" || n.cfg.Endpoint == nil {
		return ""
	}
	return n.cfg.Endpoint(id)
}

// State returns "Leader", "Follower", "Candidate" or "Shutdown".
func (n *Node) State() string { return n.raft.State().String() }

// AppliedIndex returns the index of the last command applied here.
func (n *Node) AppliedIndex() uint64 { return n.applied.Load() }

// Member is one server of the cluster configuration.
type Member struct {
	ID, RaftAddr string
	Voter        bool
}

// Members returns the cluster's configuration.
func (n *Node) Members() ([]Member, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, n.raftError(err)
	}
	var ms []Member
	for _, s := range f.Configuration().Servers {
		ms = append(ms, Member{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return ms, nil
}

// AddVoter adds a server to the cluster; only the leader can.
func (n *Node) AddVoter(ctx context.Context, id, raftAddr string) error {
	if err := checkServer(id, raftAddr); err != nil {
		return err
	}
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if err := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, timeout).Error(); err != nil {
		return n.raftError(err)
	}
	return nil
}

// Snapshot takes a snapshot now (tests and operators use it to compact).
func (n *Node) Snapshot() error {
	if err := n.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return err
	}
	return nil
}

// Failed delivers the first error with which this node failed to write
// its log. Such a node should be closed and its process stopped, so that
// it starts again from what its log holds (or, if the disk is gone, stays
// down where an operator sees it) rather than leading on a log it cannot
// write. Entries that failed were never acknowledged.
func (n *Node) Failed() <-chan error { return n.logs.failed }

// Close stops leader work, shuts Raft down and closes the log. When all
// went well it records where the log ended, so that the next start can
// tell a log damaged at its end from one a crash cut short.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		<-n.shut // a Close under way: done when it is
		return nil
	}
	n.closed = true
	n.mu.Unlock()
	defer close(n.shut)
	close(n.stop)
	<-n.done
	n.proposer.close() // raft, still running, answers what is in flight
	err := n.raft.Shutdown().Error()
	// The transport's handlers outlive raft: a heartbeat accepted before
	// the shutdown may still write the term. Wait for them before reading
	// the log's end and closing the stores.
	n.trans.Close()
	n.conns.drained()
	stop, ok := n.lastEntry()
	if ok {
		// The record covers the whole log, as the clean-shutdown record
		// says, should the next start be after a crash.
		if ferr := n.end.flush(); ferr != nil {
			ok, err = false, ferr
		}
	}
	n.closeStores()
	if err == nil && ok {
		if err = writeCleanStop(n.dir, stop); err != nil {
			err = fmt.Errorf("record a clean shutdown in %s: %w", n.dir, err)
		}
	}
	return err
}

// lastEntry returns the log's last index and term, and whether they make
// a clean stop: not when a log write failed, leaving the log's end in
// doubt.
func (n *Node) lastEntry() (cleanStop, bool) {
	if n.logs.hasFailed() {
		return cleanStop{}, false
	}
	last, err := n.log.LastIndex()
	if err != nil || last == 0 {
		return cleanStop{}, err == nil
	}
	var e raft.Log
	if err := n.log.GetLog(last, &e); err != nil {
		return cleanStop{}, false
	}
	return cleanStop{LastIndex: last, LastTerm: e.Term}, true
}

// closeStores closes the transport, waits until no handler of a connection
// it accepted can reach the stores, then closes them.
func (n *Node) closeStores() {
	if n.trans != nil {
		n.trans.Close()
		n.conns.drained()
	}
	if n.end != nil {
		n.end.close()
	}
	if n.term != nil {
		n.term.close()
	}
	if n.log != nil {
		n.log.Close()
	}
}
