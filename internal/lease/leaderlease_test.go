package lease

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
)

// Answers a leader gives from its own table (renewals that write nothing,
// UnknownLease, Remaining) stand only while no successor can exist: under
// a valid leader lease at once, otherwise after a quorum round trip; a
// deposed leader answers Unavailable. Answers that wrote to the log are
// confirmed by their commit.
func TestAnswersFromMemoryNeedLeadership(t *testing.T) {
	type state int
	const (
		leased  state = iota // the leader lease holds
		lapsed               // no lease, a quorum still confirms
		deposed              // no lease, no quorum: a successor may lead
	)
	type call func(f *fixture, live djinn.ID) error
	renew := func(d time.Duration) call {
		return func(f *fixture, live djinn.ID) error {
			_, err := f.lessor.Renew(context.Background(), live, d)
			return err
		}
	}
	renewUnknown := func(f *fixture, _ djinn.ID) error {
		_, err := f.lessor.Renew(context.Background(), djinn.NewID(), time.Minute)
		return err
	}
	remaining := func(f *fixture, live djinn.ID) error {
		_, _, err := f.lessor.Remaining(live)
		return err
	}
	cancelUnknown := func(f *fixture, _ djinn.ID) error {
		return f.lessor.Cancel(context.Background(), []djinn.ID{djinn.NewID()})[0]
	}
	tests := []struct {
		name     string
		state    state
		call     call
		want     djinn.Kind // "" for success
		verifies int
	}{
		{"LE.2.2 renewal from memory under the lease answers at once", leased, renew(time.Minute), "", 0},
		{"LE.2.2 renewal from memory without the lease asks a quorum first", lapsed, renew(time.Minute), "", 1},
		{"LE.2.2 renewal from memory on a deposed leader is Unavailable, not granted", deposed, renew(time.Minute), djinn.Unavailable, 1},
		{"LE.2.2 renewal past the horizon is confirmed by its log write", deposed, renew(5 * time.Minute), "", 0},
		{"LE.2.2 UnknownLease under the lease answers at once", leased, renewUnknown, djinn.UnknownLease, 0},
		{"LE.2.2 UnknownLease without the lease asks a quorum first", lapsed, renewUnknown, djinn.UnknownLease, 1},
		{"LE.2.2 UnknownLease on a deposed leader is Unavailable", deposed, renewUnknown, djinn.Unavailable, 1},
		{"LE.2.2 Cancel's UnknownLease under the lease answers at once", leased, cancelUnknown, djinn.UnknownLease, 0},
		{"LE.2.2 Cancel's UnknownLease on a deposed leader is Unavailable", deposed, cancelUnknown, djinn.Unavailable, 1},
		{"remaining time under the lease answers at once", leased, remaining, "", 0},
		{"remaining time without the lease asks a quorum first", lapsed, remaining, "", 1},
		{"remaining time on a deposed leader is Unavailable", deposed, remaining, djinn.Unavailable, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, Policy{Default: time.Minute, Max: 10 * time.Minute})
				defer f.stop()
				live := f.grant(time.Minute)
				f.log.mu.Lock()
				f.log.lapsed = tt.state != leased
				f.log.notLeads = tt.state == deposed
				f.log.mu.Unlock()
				err := tt.call(f, live)
				switch {
				case tt.want == "" && err != nil:
					t.Fatalf("answer = %v, want success", err)
				case tt.want != "" && !errors.Is(err, tt.want):
					t.Fatalf("answer = %v, want %s", err, tt.want)
				}
				f.log.mu.Lock()
				defer f.log.mu.Unlock()
				if f.log.verifies != tt.verifies {
					t.Fatalf("%d quorum round trips, want %d", f.log.verifies, tt.verifies)
				}
			})
		})
	}
}
