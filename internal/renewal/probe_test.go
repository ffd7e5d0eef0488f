package renewal_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/renewal"
)

// LR.2: a client lease cancelled behind the set's back (its holder
// cancelled it at the landlord) leaves its set with a renewal failure
// event within about a probe interval, not a third of its grant before it
// expires (up to two thirds of the grant after the cancel, 40 minutes for
// an hour's lease, before probes).
func TestLR2CancelledBehindTheSetsBackIsReportedWithinAProbeInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{Probe: time.Minute})
		defer f.stop()
		ll := f.landlord(time.Hour)
		st := f.create(24 * time.Hour)
		_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
		l, c := ll.grant(time.Hour)
		f.mustRenewFor(st, l, djinn.Forever, djinn.Forever)
		advance(5 * time.Minute)
		ll.Forget(c)
		advance(time.Minute + 2*time.Second) // a probe interval, and the batching window
		evs := f.listener.events(fail)
		if len(evs) != 1 {
			t.Fatalf("%d failure events a probe interval after the cancel, want 1", len(evs))
		}
		if p := failureOf(t, evs[0]); p.GetError().GetKind() != string(djinn.UnknownLease) {
			t.Errorf("failure event error %v, want unknown lease", p.GetError())
		}
		if f.leaseOf(st, c) != nil {
			t.Error("the lease is still in its set")
		}
	})
}

// Probes extend nothing and write nothing to the log: over an hour, a set
// of long leases makes the same log entries with probes as without, and
// each lease's expiration at its landlord moves only at its renewals. The
// test logs the cost: calls and lease entries at the landlord.
func TestProbesCostNoLogEntries(t *testing.T) {
	const n = 2000
	type cost struct{ proposed, calls, renewed int }
	run := func(probe time.Duration) (c cost, exps []time.Time) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, renewal.Config{Probe: probe})
			defer f.stop()
			ll := f.landlord(time.Hour)
			st := f.create(24 * time.Hour)
			cookies := make([]djinn.ID, n)
			for i := range cookies {
				l, c := ll.grant(time.Hour)
				cookies[i] = c
				f.mustRenewFor(st, l, djinn.Forever, djinn.Forever)
			}
			f.gate.mu.Lock()
			before := f.gate.proposed
			f.gate.mu.Unlock()
			for range 6 {
				advance(10 * time.Minute)
				exps = append(exps, ll.expiration(cookies[0]))
			}
			f.gate.mu.Lock()
			c.proposed = f.gate.proposed - before
			f.gate.mu.Unlock()
			counts := ll.Counts()
			c.calls, c.renewed = int(counts.RenewAllCalls+counts.RenewCalls), int(counts.Renewed)
			if evs := f.listener.events(djinn.Ref{}); len(evs) != 0 {
				t.Errorf("events %v", evs)
			}
		})
		return c, exps
	}
	without, expsWithout := run(-1)
	with, expsWith := run(time.Minute)
	t.Logf("%d leases of an hour, one hour: without probes %d log entries, %d calls, %d lease renewals at the landlord; with probes every minute %d log entries, %d calls, %d lease entries",
		n, without.proposed, without.calls, without.renewed, with.proposed, with.calls, with.renewed)
	if with.proposed != without.proposed {
		t.Errorf("probes wrote to the log: %d entries with, %d without", with.proposed, without.proposed)
	}
	if !slices.Equal(expsWith, expsWithout) {
		t.Errorf("probes moved a lease's expiration at its landlord: %v with, %v without", expsWith, expsWithout)
	}
}
