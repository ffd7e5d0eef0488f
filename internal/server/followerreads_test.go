package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
)

// A follower's read allowing staleness D is served from a read point: the
// leader's read index and the time the follower asked for it, taken
// before asking. A point is used while it is younger than D/2; an older
// one is replaced by asking again, one question for every read waiting.
func TestReadPoints(t *testing.T) {
	const maxAge = time.Second
	tests := []struct {
		name      string
		age       time.Duration // of the point held before the reads
		readers   int
		fails     bool
		wantAsks  int
		wantIndex uint64
		wantErr   bool
	}{
		{"DESIGN 7a a follower with no read point asks the leader", -1, 1, false, 1, 20, false},
		{"DESIGN 7a a point younger than half the bound serves without asking", maxAge/2 - time.Millisecond, 1, false, 0, 10, false},
		{"DESIGN 7a a point as old as half the bound is asked again", maxAge / 2, 1, false, 1, 20, false},
		{"DESIGN 7a concurrent reads share one question", maxAge, 8, false, 1, 20, false},
		{"DESIGN 7a a question the leader does not answer refuses the read", maxAge, 1, true, 1, 0, true},
		{"DESIGN 7a without an answer a point younger than the bound still serves", maxAge * 3 / 4, 1, true, 1, 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var r readPoints
				if tt.age >= 0 {
					r.latest = readPoint{index: 10, at: time.Now().Add(-tt.age)}
				}
				var asks atomic.Int32
				asked := time.Now()
				ask := func(ctx context.Context) (uint64, error) {
					asks.Add(1)
					time.Sleep(100 * time.Millisecond) // the round trip to the leader
					if tt.fails {
						return 0, djinn.Errorf(djinn.Unavailable, "no leader")
					}
					return 20, nil
				}
				var wg sync.WaitGroup
				points := make([]readPoint, tt.readers)
				errs := make([]error, tt.readers)
				for i := range tt.readers {
					wg.Go(func() { points[i], errs[i] = r.fresh(t.Context(), maxAge, time.Now, ask) })
				}
				wg.Wait()
				if got := int(asks.Load()); got != tt.wantAsks {
					t.Errorf("%d questions to the leader, want %d", got, tt.wantAsks)
				}
				for i := range tt.readers {
					if (errs[i] != nil) != tt.wantErr {
						t.Fatalf("read %d: error %v, want error %v", i, errs[i], tt.wantErr)
					}
					if tt.wantErr {
						continue
					}
					if points[i].index != tt.wantIndex {
						t.Errorf("read %d: index %d, want %d", i, points[i].index, tt.wantIndex)
					}
					if tt.wantIndex == 20 && !points[i].at.Equal(asked) {
						t.Errorf("read %d: the point is dated %v, want the time the question was sent (%v), not when it was answered", i, points[i].at, asked)
					}
				}
			})
		})
	}
}

// A reader whose context ends while the question is under way gives up;
// the question still completes for the others.
func TestReadPointsReaderGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r readPoints
		release := make(chan struct{})
		ask := func(ctx context.Context) (uint64, error) {
			<-release
			return 7, nil
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := r.fresh(ctx, time.Second, time.Now, ask)
			done <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("a reader that gave up: %v, want its context's error", err)
		}
		close(release)
		p, err := r.fresh(t.Context(), time.Second, time.Now, ask)
		if err != nil || p.index != 7 {
			t.Fatalf("the next read: %v, %v; want the point the question brought", p, err)
		}
	})
}
