package txn_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// A participant that crashes between its join and its prepare has lost the
// transaction's changes, and its crash count has changed: whether it joins
// again with the new count (TX.2.3: CrashCount) or only answers the prepare
// (UnknownTransaction), the transaction always aborts (issue 3, section 5),
// whichever of 2–5 participants it is, and whether it crashes before the
// commit or while the others vote.
func TestCrashCountChangeAborts(t *testing.T) {
	type when int
	const (
		beforeCommit when = iota // crashes, and maybe rejoins, before commit is called
		atPrepare                // crashes as its prepare arrives; maybe rejoins first
	)
	for n := 2; n <= 5; n++ {
		for _, j := range dedupe(0, n/2, n-1) {
			for _, w := range []when{beforeCommit, atPrepare} {
				for _, rejoin := range []bool{true, false} {
					name := fmt.Sprintf("%d participants, #%d crashes %s, rejoins %v", n, j+1, map[when]string{beforeCommit: "before commit", atPrepare: "as its prepare arrives"}[w], rejoin)
					t.Run(name, func(t *testing.T) {
						synctest.Test(t, func(t *testing.T) {
							s := newSweep(t, uint64(n*100+j*10+int(w)*2))
							tx := s.begin(n)
							tx.abort = false
							s.m.mu.Lock()
							for i, pn := range tx.parts {
								// The others would commit: PREPARED or NOTCHANGED.
								s.m.parts[pn].votes[tx.id] = []djinnpb.TransactionState{txn.Prepared, txn.NotChanged}[i%2]
							}
							s.m.parts[tx.parts[j]].votes[tx.id] = txn.Prepared
							s.m.mu.Unlock()
							crashed := s.m.parts[tx.parts[j]]
							crash := func() {
								// Called with s.m.mu held.
								s.m.crashLocked(crashed)
								tx.lost = append(tx.lost, crashed.name)
								if !rejoin {
									return
								}
								err := s.g.svc.Join(s.g.ctx, tx.id, txn.SecretOf(s.g.svc, tx.id), part(crashed.name), crashed.crash)
								if err == nil {
									// Accepted: it goes on with the transaction,
									// what it did before the crash gone.
									crashed.mem[tx.id] = txn.Active
								}
								if djinn.KindOf(err) != djinn.CrashCount {
									t.Errorf("TX.2.3: join with crash count %d after %d: %v, want CrashCount", crashed.crash, crashed.crash-1, err)
								}
							}
							switch w {
							case beforeCommit:
								s.m.mu.Lock()
								crash()
								s.m.mu.Unlock()
							case atPrepare:
								s.m.mu.Lock()
								crashed.beforePrepare = crash
								s.m.mu.Unlock()
							}
							s.run([]*sweepTxn{tx}, crashPoint{})
							if !tx.refused {
								t.Errorf("commit of a transaction a participant lost: ok %v, want CannotCommit", tx.okCommit)
							}
							s.finish() // checks that it aborted everywhere
						})
					})
				}
			}
		}
	}
}

func dedupe(xs ...int) []int {
	var out []int
	for _, x := range xs {
		if len(out) == 0 || out[len(out)-1] != x {
			out = append(out, x)
		}
	}
	return out
}

// A crash count change also reaches a parent through a nested
// transaction: a participant of the parent that crashed and joins a nested
// transaction with its new count is promoted into the parent when that
// commits, and the parent aborts (TX.2.7 promote, TX.2.3).
func TestCrashCountChangeThroughNested(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		f.parts.set("a", txn.Prepared, nil)
		f.parts.set("b", txn.Prepared, nil)
		p := f.create(time.Hour)
		f.join(p.ID, "a", "b")
		c := f.nest(p.ID)
		// a restarted (crash count 2) and does work under the nested
		// transaction, which has not seen it before.
		if err := f.svc.Join(context.Background(), c.ID, txn.SecretOf(f.svc, c.ID), part("a"), 2); err != nil {
			t.Fatalf("join of a nested transaction that does not know the participant: %v", err)
		}
		wantKind(t, "commit of a nested transaction promoting a participant with a new crash count", f.svc.Commit(context.Background(), c.ID, nil), djinn.CannotCommit)
		if st := f.state(p.ID); st != txn.Aborted {
			t.Fatalf("parent after a promote with a new crash count: %v, want ABORTED", stateName(st))
		}
		if st := f.state(c.ID); st != txn.Aborted {
			t.Fatalf("nested transaction: %v, want ABORTED", stateName(st))
		}
		wantKind(t, "commit of the parent", f.svc.Commit(context.Background(), p.ID, nil), djinn.CannotCommit)
		synctest.Wait()
		for _, call := range f.parts.got() {
			if call == "a commit" || call == "b commit" {
				t.Fatalf("calls %v: nothing may commit", f.parts.got())
			}
		}
	})
}
