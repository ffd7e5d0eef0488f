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
	rng := rand.New(rand.NewPCG(seed, 0))

	mn := newNode(t)
	mgr := mn.start(t)
	defer func() { mgr.kill() }()
	p1, p2 := newNode(t).start(t), newNode(t).start(t)
	defer p1.stop(t)
	defer p2.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	st, err := djinnpb.NewAdminClient(dial(t, mgr.addr)).Status(ctx, &djinnpb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ref := st.GetTxn()
	tm := djinnpb.NewTransactionManagerClient(dial(t, mgr.addr))
	kvs := []djinnpb.KeyValueClient{djinnpb.NewKeyValueClient(dial(t, p1.addr)), djinnpb.NewKeyValueClient(dial(t, p2.addr))}

	kills := 0
	restart := func() {
		t.Helper()
		mgr.kill()
		kills++
		mgr = mn.start(t)
		tm = djinnpb.NewTransactionManagerClient(dial(t, mgr.addr))
	}
	// retry calls f until it gives an answer that is not Unavailable: the
	// manager may be starting, a participant's connection to it waiting
	// to reconnect.
	retry := func(f func() error) error {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			err := f()
			if !errors.Is(grpcerr.FromStatus(err), djinn.ErrUnavailable) || time.Now().After(deadline) {
				return err
			}
			<-time.After(50 * time.Millisecond)
		}
	}

	type result struct {
		id      uint64
		key     string
		how     string
		ok      bool // a commit returned OK
		refused bool // a commit returned CannotCommit
	}
	var results []*result
	for i := range txns {
		r := &result{key: fmt.Sprintf("k%02d", i)}
		results = append(results, r)
		var c *djinnpb.CreatedTransaction
		if err := retry(func() (err error) {
			c, err = tm.Create(ctx, &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(time.Minute)})
			return err
		}); err != nil {
			t.Fatalf("create: %v\n%s", err, mgr.output())
		}
		r.id = c.GetId()
		for j, kv := range kvs {
			if err := retry(func() error {
				_, err := kv.Put(ctx, &djinnpb.KVPutRequest{Key: r.key, Value: []byte("v"), Txn: &djinnpb.KVTransaction{Manager: ref, Id: r.id}})
				return err
			}); err != nil {
				t.Fatalf("transaction %d: put on participant %d: %v", r.id, j+1, err)
			}
		}
		commit := func() error {
			_, err := tm.Commit(ctx, &djinnpb.CompleteTransactionRequest{Id: r.id})
			switch {
			case err == nil:
				r.ok = true
			case errors.Is(grpcerr.FromStatus(err), djinn.ErrCannotCommit):
				r.refused = true
			}
			return err
		}
		switch rng.IntN(5) {
		case 0:
			r.how = "no kill"
			if err := commit(); err != nil && !r.refused {
				t.Fatalf("transaction %d: commit: %v", r.id, err)
			}
		case 1:
			r.how = "killed before commit"
			restart()
			if err := retry(commit); err != nil && !r.refused {
				t.Fatalf("transaction %d: commit after the restart: %v", r.id, err)
			}
		case 2:
			r.how = "killed during commit"
			killed := make(chan struct{})
			delay, victim := time.Duration(rng.Int64N(int64(3*time.Millisecond))), mgr
			go func() {
				<-time.After(delay)
				victim.kill()
				close(killed)
			}()
			err := commit()
			<-killed
			if err != nil {
				r.how += " (answer lost)"
			}
			kills++
			mgr = mn.start(t)
			tm = djinnpb.NewTransactionManagerClient(dial(t, mgr.addr))
			if err != nil && !r.refused && rng.IntN(2) == 0 {
				// The answer was lost: ask again, as a client would.
				r.how += ", commit again"
				if err := retry(commit); err != nil && !r.refused {
					t.Fatalf("transaction %d: commit again after the restart: %v", r.id, err)
				}
			}
		case 3:
			r.how = "killed after commit"
			if err := commit(); err != nil && !r.refused {
				t.Fatalf("transaction %d: commit: %v", r.id, err)
			}
			restart()
		case 4:
			r.how = "killed before commit, client gone"
			restart()
		}
	}

	// Recovery: every transaction decided and every participant told. A
	// client that gave up on a commit leaves its transaction to the
	// manager: VOTING ones are voted again, ACTIVE ones end with their
	// lease; here the client aborts those, not to wait a minute.
	committed := 0
	outcomes := map[string]int{}
	for _, r := range results {
		var d *djinnpb.TransactionDescription
		settled := poll(30*time.Second, func() bool {
			var err error
			d, err = tm.Describe(ctx, &djinnpb.TransactionRequest{Id: r.id})
			if err != nil {
				return false
			}
			if d.GetState() == djinnpb.TransactionState_TRANSACTION_STATE_ACTIVE {
				_, _ = tm.Abort(ctx, &djinnpb.CompleteTransactionRequest{Id: r.id})
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
			t.Fatalf("transaction %d (%s) not settled after recovery: %v\n%s", r.id, r.how, d, mgr.output())
		}
		var found []bool
		for j, kv := range kvs {
			g, err := kv.Get(ctx, &djinnpb.KVGetRequest{Key: r.key})
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
		if isCommitted {
			committed++
		}
		outcomes[fmt.Sprintf("%s: %s", r.how, strings.TrimPrefix(d.GetState().String(), "TRANSACTION_STATE_"))]++
	}
	t.Logf("%d transactions, %d committed, %d kills of the manager; %v", txns, committed, kills, outcomes)
	if committed == 0 {
		t.Errorf("no transaction committed:\n%s", mgr.output())
	}
}
