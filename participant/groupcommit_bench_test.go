package participant_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/participant/participanttest"
)

// BenchmarkGroupCommit runs whole transactions through a participant on a
// FileStore, a given number at once: each is joined, changed, prepared
// (its prepared record written before the vote) and committed (the roll
// forward written before the answer). It reports the store's fsyncs per
// transaction: 2 when one transaction runs at a time, fewer the more run
// at once, since concurrent records share a write and its fsync. A store
// that wrote each record alone would stay at 2 whatever the concurrency.
func BenchmarkGroupCommit(b *testing.B) {
	for _, par := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("transactions=%d", par), func(b *testing.B) {
			store, err := participant.OpenFileStore(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			mgr, res := participanttest.NewManager(), newFakeRes()
			p, err := participant.New(participant.Config{Endpoint: "127.0.0.1:9", Store: store, Resource: res, Managers: mgr})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			_, before := store.Writes()
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range par {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if err := oneTransaction(p, mgr, res); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			_, after := store.Writes()
			b.ReportMetric(float64(after-before)/float64(b.N), "fsyncs/tx")
		})
	}
}

// oneTransaction joins, changes, prepares and commits one transaction.
func oneTransaction(p *participant.Participant, mgr *participanttest.Manager, res *fakeRes) error {
	ctx := context.Background()
	tx := mgr.Create()
	done, err := p.Join(ctx, tx)
	if err != nil {
		return err
	}
	res.change(tx, "v")
	done()
	if v, err := p.Prepare(ctx, tx); err != nil || v != participant.Prepared {
		return fmt.Errorf("prepare %d: %v, %v; want PREPARED", tx.ID, v, err)
	}
	mgr.SetState(tx, participant.Committed)
	return p.Commit(ctx, tx)
}
