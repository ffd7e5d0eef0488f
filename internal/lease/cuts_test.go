package lease

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
)

// Cuts moves when a lease ends or its expiration moves earlier, and only
// then: a caller that found a lease alive until a time may trust that time
// while Cuts stands still.
func TestCutsCountEndsAndEarlierExpirations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, policy)
		defer f.stop()
		a, b := f.grant(5*time.Minute), f.grant(5*time.Minute)
		steps := []struct {
			name string
			do   func()
			cut  bool
		}{
			{"a grant", func() { f.grant(time.Minute) }, false},
			{"a renewal to a later expiration", func() { f.renew(a, 10*time.Minute) }, false},
			{"a holder's renewal to an earlier expiration", func() { f.renew(a, time.Minute) }, true},
			{"a cancel", func() {
				if errs := f.lessor.Cancel(context.Background(), []djinn.ID{b}); errs[0] != nil {
					t.Fatal(errs[0])
				}
			}, true},
			{"an expiry", func() { time.Sleep(2 * time.Minute); synctest.Wait() }, true},
			{"a leader's promotion", func() { f.table.Promote(time.Now(), time.Second) }, true},
			{"a reset", f.table.Reset, true},
		}
		for _, s := range steps {
			before := f.table.Cuts()
			s.do()
			if got := f.table.Cuts() != before; got != s.cut {
				t.Errorf("%s: Cuts moved %v, want %v", s.name, got, s.cut)
			}
		}
	})
}

func (f *fixture) renew(c djinn.ID, d time.Duration) {
	f.t.Helper()
	if _, err := f.lessor.Renew(context.Background(), c, d); err != nil {
		f.t.Fatal(err)
	}
}
