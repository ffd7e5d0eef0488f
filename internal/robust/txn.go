package robust

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The transaction workload: a worker creates a transaction at the
// replicated manager, writes keys of its own under it at the key/value
// participants of two or three members, and commits it (or aborts it when
// a write fails). CheckTxns then reads every transaction's keys from
// every participant it wrote to: all must be there or none — all when the
// commit was answered, none when it was refused or never asked.

// txnResult is what the worker learnt of its transaction's outcome.
type txnResult int

const (
	txnNone      txnResult = iota // no commit asked (a write failed): aborted
	txnCommitted                  // the commit was answered
	txnAborted                    // the commit was refused
	txnUnknown                    // the commit's answer was lost
)

// TxnRecord is one transaction: the keys it wrote, by member, and what
// its worker learnt.
type TxnRecord struct {
	ID     uint64
	Writes map[int][]string // member → keys
	Result txnResult
}

// TxnLog is the transactions run.
type TxnLog struct {
	mu  sync.Mutex
	txs []TxnRecord // guarded by mu
}

func (l *TxnLog) add(t TxnRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.txs = append(l.txs, t)
}

// Records returns the transactions run.
func (l *TxnLog) Records() []TxnRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]TxnRecord(nil), l.txs...)
}

// txnWorker runs transactions one after another until ctx ends.
func (r *Run) txnWorker(ctx context.Context, id int, rng *rand.Rand) {
	caller := NewCaller(r.c, id)
	for seq := 0; ctx.Err() == nil; seq++ {
		var created *djinnpb.CreatedTransaction
		o, _ := caller.Call(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
			got, err := djinnpb.NewTransactionManagerClient(cc).Create(ctx, &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(time.Minute)})
			created = got
			return err
		})
		if o != Done {
			r.pause(ctx, 50*time.Millisecond)
			continue
		}
		rec := r.writeUnder(ctx, created, caller.as, fmt.Sprintf("r%d/t%d-%d", r.seed, id, seq), rng)
		if rec.Result == txnNone {
			r.txnAbort(ctx, caller, created.Id)
		} else {
			rec.Result = r.txnCommit(ctx, caller, created.Id)
		}
		r.txns.add(rec)
		if rec.Result == txnCommitted {
			r.count("transactions committed")
		}
		r.pause(ctx, time.Duration(10+rng.IntN(40))*time.Millisecond)
	}
}

// writeUnder writes one or two keys at two or three members under the
// transaction; its result is txnNone if a write was not answered.
func (r *Run) writeUnder(ctx context.Context, created *djinnpb.CreatedTransaction, as Principal, prefix string, rng *rand.Rand) TxnRecord {
	rec := TxnRecord{ID: created.Id, Writes: map[int][]string{}, Result: txnCommitted}
	skip := -1
	if rng.IntN(2) == 0 {
		skip = rng.IntN(len(r.c.Nodes))
	}
	tx := &djinnpb.KVTransaction{Manager: created.Manager, Id: created.Id, Secret: created.Secret}
	for i, n := range r.c.Nodes {
		if i == skip {
			continue
		}
		for k := range 1 + rng.IntN(2) {
			key := fmt.Sprintf("%s/%d", prefix, k)
			rec.Writes[i] = append(rec.Writes[i], key)
			actx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, err := djinnpb.NewKeyValueClient(n.Conn(as)).Put(actx, &djinnpb.KVPutRequest{Key: key, Value: []byte(prefix), Txn: tx})
			cancel()
			if err != nil {
				rec.Result = txnNone
				return rec
			}
		}
	}
	return rec
}

// txnCommit asks the manager to commit, through whichever member leads.
func (r *Run) txnCommit(ctx context.Context, caller *Caller, id uint64) txnResult {
	o, err := caller.Call(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := djinnpb.NewTransactionManagerClient(cc).Commit(ctx, &djinnpb.CompleteTransactionRequest{Id: id})
		return err
	})
	switch {
	case o == Done:
		return txnCommitted
	case o == NotDone && (errors.Is(grpcerr.FromStatus(err), djinn.ErrCannotCommit) || errors.Is(grpcerr.FromStatus(err), djinn.ErrUnknownTransaction)):
		return txnAborted
	}
	return txnUnknown
}

// txnAbort asks the manager to abort, once: if it does not, the
// transaction was never asked to commit, and its lease ends it.
func (r *Run) txnAbort(ctx context.Context, caller *Caller, id uint64) {
	_, _ = caller.Call(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := djinnpb.NewTransactionManagerClient(cc).Abort(ctx, &djinnpb.CompleteTransactionRequest{Id: id})
		return err
	})
}

// CheckTxns reads every transaction's keys from the members it wrote to
// until each transaction is on all of them or on none, as its outcome
// requires, or until ctx ends (a transaction still prepared somewhere is
// waiting for its roll-forward): what is still wrong then is reported.
func (r *Run) CheckTxns(ctx context.Context) []string {
	pending := r.txns.Records()
	var v []string
	for {
		var wrong []TxnRecord
		v = v[:0]
		for _, t := range pending {
			if why := r.txnWrong(ctx, t); why != "" {
				wrong = append(wrong, t)
				v = append(v, why)
			}
		}
		if len(wrong) == 0 || ctx.Err() != nil {
			return v
		}
		pending = wrong
		r.pause(ctx, 200*time.Millisecond)
	}
}

// txnWrong says how t's keys break all-or-none, or "".
func (r *Run) txnWrong(ctx context.Context, t TxnRecord) string {
	present, absent := 0, 0
	for node, keys := range t.Writes {
		for _, k := range keys {
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			got, err := djinnpb.NewKeyValueClient(r.c.Nodes[node].Conn(Alice)).Get(actx, &djinnpb.KVGetRequest{Key: k})
			cancel()
			switch {
			case err != nil:
				return fmt.Sprintf("transaction %d: key %s at %s unreadable: %v", t.ID, k, r.c.Nodes[node].ID, err)
			case got.Found:
				present++
			default:
				absent++
			}
		}
	}
	switch {
	case present > 0 && absent > 0:
		return fmt.Sprintf("transaction %d: %d of its writes applied, %d not", t.ID, present, absent)
	case t.Result == txnCommitted && present == 0:
		return fmt.Sprintf("transaction %d: committed, but none of its %d writes applied", t.ID, absent)
	case (t.Result == txnAborted || t.Result == txnNone) && present > 0:
		return fmt.Sprintf("transaction %d: not committed, but its %d writes applied", t.ID, present)
	}
	return ""
}
