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
// leader's read index, applied, and the time the follower asked for it,
// taken before asking. A point younger than D/2 serves as it is; one
// between D/2 and D serves too while a new one is asked in the
// background; an older one (or none) waits for the new one. Reads share
// one question.
func TestReadPoints(t *testing.T) {
	const maxAge = time.Second
	tests := []struct {
		name      string
		age       time.Duration // of the point held before the reads; < 0: none
		readers   int
		fails     bool
		wantAsks  int
		wantIndex uint64
		wantErr   bool
	}{
		{"DESIGN 7a a follower with no read point asks the leader and applies its index", -1, 1, false, 1, 20, false},
		{"DESIGN 7a a point younger than half the bound serves without asking", maxAge/2 - time.Millisecond, 1, false, 0, 10, false},
		{"DESIGN 7a a point older than half the bound serves while a new one is asked", maxAge * 3 / 4, 1, false, 1, 10, false},
		{"DESIGN 7a a point as old as the bound waits for a new one", maxAge, 1, false, 1, 20, false},
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
				var applied atomic.Uint64
				asked := time.Now()
				ask := func(ctx context.Context) (uint64, error) {
					asks.Add(1)
					time.Sleep(100 * time.Millisecond) // the round trip to the leader
					if tt.fails {
						return 0, djinn.Errorf(djinn.Unavailable, "no leader")
					}
					return 20, nil
				}
				apply := func(ctx context.Context, index uint64) error {
					time.Sleep(50 * time.Millisecond) // the next append brings the commit index
					applied.Store(index)
					return nil
				}
				var wg sync.WaitGroup
				points := make([]readPoint, tt.readers)
				errs := make([]error, tt.readers)
				for i := range tt.readers {
					wg.Go(func() { points[i], errs[i] = r.fresh(t.Context(), maxAge, time.Now, ask, apply) })
				}
				wg.Wait()
				time.Sleep(time.Second) // (the bubble's clock) a question in the background ends
				synctest.Wait()
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
					if tt.wantIndex == 20 {
						if applied.Load() < 20 {
							t.Errorf("read %d: served from index 20 before it was applied", i)
						}
						if !points[i].at.Equal(asked) {
							t.Errorf("read %d: the point is dated %v, want the time the question was sent (%v), not when it was answered", i, points[i].at, asked)
						}
					}
				}
				if !tt.fails && tt.wantAsks > 0 && r.latest.index != 20 {
					t.Errorf("after the question the latest point is %d, want 20", r.latest.index)
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
		apply := func(context.Context, uint64) error { return nil }
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := r.fresh(ctx, time.Second, time.Now, ask, apply)
			done <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("a reader that gave up: %v, want its context's error", err)
		}
		close(release)
		p, err := r.fresh(t.Context(), time.Second, time.Now, ask, apply)
		if err != nil || p.index != 7 {
			t.Fatalf("the next read: %v, %v; want the point the question brought", p, err)
		}
	})
}
