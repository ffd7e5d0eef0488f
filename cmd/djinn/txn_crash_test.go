package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestTxnSurvivesManagerKill is the kill -9 half of the crash-point sweep
// (issue 3, section 5): a transaction manager and two key/value
// participants, each its own djinn serve; transactions that write one key
// on each participant; the manager killed with SIGKILL at random moments —
// after the writes, during the commit, right after it returned — and
// started again on its data. Once it has recovered, each key is on both
// participants or on neither, and every commit that returned OK is on
// both.
func TestTxnSurvivesManagerKill(t *testing.T) {
	const txns = 30
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	k := &killRig{t: t, rng: rand.New(rand.NewPCG(seed, 0)), mn: newNode(t)}
	k.mgr = k.mn.start(t)
	defer func() { k.mgr.kill() }()
	p1, p2 := newNode(t).start(t), newNode(t).start(t)
	defer p1.stop(t)
	defer p2.stop(t)
	var cancel context.CancelFunc
	k.ctx, cancel = context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	st, err := djinnpb.NewAdminClient(dial(t, k.mgr.addr)).Status(k.ctx, &djinnpb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	k.ref = st.GetTxn()
	k.tm = djinnpb.NewTransactionManagerClient(dial(t, k.mgr.addr))
	k.kvs = []djinnpb.KeyValueClient{djinnpb.NewKeyValueClient(dial(t, p1.addr)), djinnpb.NewKeyValueClient(dial(t, p2.addr))}
	var results []*killResult
	for i := range txns {
		results = append(results, k.transact(fmt.Sprintf("k%02d", i)))
	}
	// Recovery: every transaction decided and every participant told.
	committed := 0
	outcomes := map[string]int{}
	for _, r := range results {
		state := k.check(r, k.settle(r))
		if state == djinnpb.TransactionState_TRANSACTION_STATE_COMMITTED {
			committed++
		}
		outcomes[fmt.Sprintf("%s: %s", r.how, strings.TrimPrefix(state.String(), "TRANSACTION_STATE_"))]++
	}
	t.Logf("%d transactions, %d committed, %d kills of the manager; %v", txns, committed, k.kills, outcomes)
	if committed == 0 {
		t.Errorf("no transaction committed:\n%s", k.mgr.output())
	}
}

// killRig is a manager that is killed and started again, with two
// participants.
type killRig struct {
	t     *testing.T
	ctx   context.Context
	rng   *rand.Rand
	mn    *node
	mgr   *proc
	ref   *djinnpb.Ref
	tm    djinnpb.TransactionManagerClient
	kvs   []djinnpb.KeyValueClient
	kills int
}

// killResult is one transaction: how the manager was killed around it, and
// what its commit answered.
type killResult struct {
	id      uint64
	key     string
	how     string
	ok      bool // a commit returned OK
	refused bool // a commit returned CannotCommit
}

// restart kills the manager and starts it again on its data.
func (k *killRig) restart() {
	k.t.Helper()
	k.mgr.kill()
	k.started()
}

// started counts a kill and starts the manager again.
func (k *killRig) started() {
	k.kills++
	k.mgr = k.mn.start(k.t)
	k.tm = djinnpb.NewTransactionManagerClient(dial(k.t, k.mgr.addr))
}

// retry calls f until it gives an answer that is not Unavailable: the
// manager may be starting, a participant's connection to it waiting to
// reconnect.
func retry(f func() error) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := f()
		if !errors.Is(grpcerr.FromStatus(err), djinn.ErrUnavailable) || time.Now().After(deadline) {
			return err
		}
		<-time.After(50 * time.Millisecond)
	}
}

// commit commits r's transaction and notes the answer.
func (k *killRig) commit(r *killResult) error {
	_, err := k.tm.Commit(k.ctx, &djinnpb.CompleteTransactionRequest{Id: r.id})
	switch {
	case err == nil:
		r.ok = true
	case errors.Is(grpcerr.FromStatus(err), djinn.ErrCannotCommit):
		r.refused = true
	}
	return err
}

// transact writes key on both participants under a new transaction and
// commits it, killing the manager at a random moment.
func (k *killRig) transact(key string) *killResult {
	t := k.t
	r := &killResult{key: key}
	var c *djinnpb.CreatedTransaction
	if err := retry(func() (err error) {
		c, err = k.tm.Create(k.ctx, &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(time.Minute)})
		return err
	}); err != nil {
		t.Fatalf("create: %v\n%s", err, k.mgr.output())
	}
	r.id = c.GetId()
	for j, kv := range k.kvs {
		if err := retry(func() error {
			_, err := kv.Put(k.ctx, &djinnpb.KVPutRequest{Key: r.key, Value: []byte("v"), Txn: &djinnpb.KVTransaction{Manager: k.ref, Id: r.id, Secret: c.GetSecret()}})
			return err
		}); err != nil {
			t.Fatalf("transaction %d: put on participant %d: %v", r.id, j+1, err)
		}
	}
	k.kill(r)
	return r
}

// kill commits r, killing the manager before, during or after the commit,
// or not at all.
func (k *killRig) kill(r *killResult) {
	t := k.t
	switch k.rng.IntN(5) {
	case 0:
		r.how = "no kill"
		if err := k.commit(r); err != nil && !r.refused {
			t.Fatalf("transaction %d: commit: %v", r.id, err)
		}
	case 1:
		r.how = "killed before commit"
		k.restart()
		if err := retry(func() error { return k.commit(r) }); err != nil && !r.refused {
			t.Fatalf("transaction %d: commit after the restart: %v", r.id, err)
		}
	case 2:
		k.killDuringCommit(r)
	case 3:
		r.how = "killed after commit"
		if err := k.commit(r); err != nil && !r.refused {
			t.Fatalf("transaction %d: commit: %v", r.id, err)
		}
		k.restart()
	case 4:
		r.how = "killed before commit, client gone"
		k.restart()
	}
}

// killDuringCommit kills the manager a moment into the commit call; when
// the answer was lost, the client asks again half of the time.
func (k *killRig) killDuringCommit(r *killResult) {
	r.how = "killed during commit"
	killed := make(chan struct{})
	delay, victim := time.Duration(k.rng.Int64N(int64(3*time.Millisecond))), k.mgr
	go func() {
		<-time.After(delay)
		victim.kill()
		close(killed)
	}()
	err := k.commit(r)
	<-killed
	if err != nil {
		r.how += " (answer lost)"
	}
	k.started()
	if err != nil && !r.refused && k.rng.IntN(2) == 0 {
		r.how += ", commit again"
		if err := retry(func() error { return k.commit(r) }); err != nil && !r.refused {
			k.t.Fatalf("transaction %d: commit again after the restart: %v", r.id, err)
		}
	}
}

// settle waits until r's transaction is decided and every participant was
// told. A client that gave up on a commit leaves its transaction to the
// manager: VOTING ones are voted again, ACTIVE ones end with their lease;
// here the client aborts those, not to wait a minute.
func (k *killRig) settle(r *killResult) *djinnpb.TransactionDescription {
	var d *djinnpb.TransactionDescription
	settled := poll(30*time.Second, func() bool {
		var err error
		d, err = k.tm.Describe(k.ctx, &djinnpb.TransactionRequest{Id: r.id})
		if err != nil {
			return false
		}
		if d.GetState() == djinnpb.TransactionState_TRANSACTION_STATE_ACTIVE {
			_, _ = k.tm.Abort(k.ctx, &djinnpb.CompleteTransactionRequest{Id: r.id})
			return false
		}
		if d.GetState() != djinnpb.TransactionState_TRANSACTION_STATE_COMMITTED && d.GetState() != djinnpb.TransactionState_TRANSACTION_STATE_ABORTED {
			return false
		}
		for _, p := range d.GetParticipants() {
			if !p.GetNotified() {
				return false
			}
		}
		return true
	})
	if !settled {
		k.t.Fatalf("transaction %d (%s) not settled after recovery: %v\n%s", r.id, r.how, d, k.mgr.output())
	}
	return d
}

// check checks that r's key is on both participants or on neither, as the
// manager decided, and on both when its commit returned OK.
func (k *killRig) check(r *killResult, d *djinnpb.TransactionDescription) djinnpb.TransactionState {
	t := k.t
	var found []bool
	for j, kv := range k.kvs {
		g, err := kv.Get(k.ctx, &djinnpb.KVGetRequest{Key: r.key})
		if err != nil {
			t.Fatalf("get %s on participant %d: %v", r.key, j+1, err)
		}
		found = append(found, g.GetFound())
	}
	isCommitted := d.GetState() == djinnpb.TransactionState_TRANSACTION_STATE_COMMITTED
	what := fmt.Sprintf("transaction %d (%s; commit ok %v, refused %v; manager says %s): key %s on participant 1 %v, on 2 %v",
		r.id, r.how, r.ok, r.refused, strings.TrimPrefix(d.GetState().String(), "TRANSACTION_STATE_"), r.key, found[0], found[1])
	switch {
	case found[0] != found[1]:
		t.Errorf("%s: MIXED OUTCOME", what)
	case found[0] != isCommitted:
		t.Errorf("%s: the participants disagree with the manager", what)
	case r.ok && !isCommitted:
		t.Errorf("%s: the commit returned OK", what)
	case r.refused && isCommitted:
		t.Errorf("%s: the commit was refused", what)
	}
	return d.GetState()
}
