package replica

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// heldTerm is a stable store that holds the write of one term until
// released, as a slow disk holds a heartbeat's handler.
type heldTerm struct {
	raft.StableStore
	mu      sync.Mutex
	term    uint64        // the term whose write is held; 0: none yet
	held    chan struct{} // closed when the write is held
	release chan struct{} // closed to let it go on
	err     error         // the held write's error, once released
}

func (h *heldTerm) hold(term uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.term = term
}

func (h *heldTerm) SetUint64(key []byte, v uint64) error {
	h.mu.Lock()
	held := string(key) == "CurrentTerm" && h.term != 0 && v == h.term
	h.mu.Unlock()
	if !held {
		return h.StableStore.SetUint64(key, v)
	}
	close(h.held)
	<-h.release
	err := h.StableStore.SetUint64(key, v)
	h.mu.Lock()
	h.err = err
	h.mu.Unlock()
	// Raft panics on a failed term write; the test reports it instead.
	return nil
}

// TestCloseWaitsForHeartbeatHandlers: a heartbeat from a newer term that
// the transport accepted before Close, held inside its handler while Close
// runs, still writes its term to an open store — Close waits for the
// transport's handlers before it closes the stores — and the term is there
// when the node opens again.
func TestCloseWaitsForHeartbeatHandlers(t *testing.T) {
	dir := t.TempDir()
	store := &heldTerm{held: make(chan struct{}), release: make(chan struct{})}
	leading := make(chan struct{}, 1)
	draining := make(chan struct{})
	n, err := Open(Config{
		DataDir: dir, RaftAddr: "127.0.0.1:0", Bootstrap: true,
		OnLeader: func(ctx context.Context) {
			select {
			case leading <- struct{}{}:
			default:
			}
			<-ctx.Done()
		},
		wrapStable: func(s raft.StableStore) raft.StableStore { store.StableStore = s; return store },
		onDrain:    sync.OnceFunc(func() { close(draining) }),
	}, newCounter())
	if err != nil {
		t.Fatal(err)
	}
	<-leading
	term := n.Term() + 10
	store.hold(term)

	sender, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 10*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		req := &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("elsewhere"), Addr: sender.EncodePeer("elsewhere", sender.LocalAddr())},
			Term:      term,
		}
		var resp raft.AppendEntriesResponse
		_ = sender.AppendEntries("node", raft.ServerAddress(n.RaftAddr()), req, &resp) // the connection is closed under it
	}()
	<-store.held

	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	select {
	case <-draining: // Close waits for the handler: let the write go on
	case err := <-closed: // Close did not wait: the write meets closed stores
		t.Errorf("Close returned (%v) while a heartbeat's handler was still writing the term", err)
	}
	close(store.release)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	<-sent
	store.mu.Lock()
	werr := store.err
	store.mu.Unlock()
	if werr != nil {
		t.Fatalf("the held heartbeat wrote its term after Close closed the stores: %v", werr)
	}

	again, err := Open(Config{DataDir: dir, RaftAddr: "127.0.0.1:0"}, newCounter())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got := again.Term(); got < term {
		t.Errorf("term after reopening = %d, want at least %d, the term the handler wrote before Close returned", got, term)
	}
}
