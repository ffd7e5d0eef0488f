package replica

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// quorum stands for the cluster a leader confirms its leadership with: each
// confirmation waits for the test to answer it.
type quorum struct {
	asked   chan struct{}
	answers chan error
}

func newQuorum() *quorum { return &quorum{asked: make(chan struct{}, 16), answers: make(chan error)} }

func (q *quorum) confirm() error {
	q.asked <- struct{}{}
	return <-q.answers
}

// runLease runs l's loop against q until the test ends.
func runLease(t *testing.T, l *leaderLease, q *quorum) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.run(ctx, q.confirm, time.Now)
	}()
	t.Cleanup(func() {
		cancel()
		for {
			select {
			case <-done:
				return
			case q.answers <- errors.New("stopping"):
			}
		}
	})
}

// startLease starts a lease of 75ms with its loop against a new quorum.
func startLease(t *testing.T) (*leaderLease, *quorum) {
	l := newLeaderLease(75*time.Millisecond, time.Now())
	q := newQuorum()
	runLease(t, l, q)
	return l, q
}

// askAndAnswer has a caller ask for the lease and the quorum answer its
// confirmation with err.
func askAndAnswer(l *leaderLease, q *quorum, err error) {
	l.valid(time.Now())
	<-q.asked
	q.answers <- err
	synctest.Wait()
}

func TestLeaderLeaseLapsesWithoutQuorumContact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound = 75 * time.Millisecond
		l := newLeaderLease(bound, time.Now())
		q := newQuorum()
		runLease(t, l, q)
		if l.valid(time.Now()) {
			t.Fatal("lease valid before any confirmation")
		}
		<-q.asked
		start := time.Now() // the confirmation started now: no time passes here
		q.answers <- nil
		synctest.Wait()
		if !l.valid(time.Now()) {
			t.Fatal("lease not valid after a quorum confirmed")
		}
		// From here no confirmation returns: the quorum is out of reach.
		time.Sleep(bound - time.Nanosecond)
		if !l.valid(time.Now()) {
			t.Fatalf("lease lapsed %v after its confirmation started, before its bound %v", time.Since(start), bound)
		}
		time.Sleep(time.Nanosecond)
		if l.valid(time.Now()) {
			t.Fatalf("lease still valid %v after its last confirmation started (bound %v)", time.Since(start), bound)
		}
	})
}

func TestLeaderLeaseFailedConfirmationGrantsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, q := startLease(t)
		askAndAnswer(l, q, errors.New("leadership lost"))
		if l.valid(time.Now()) {
			t.Fatal("lease valid after a failed confirmation")
		}
	})
}

func TestLeaderLeaseHoldRevokesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, q := startLease(t)
		askAndAnswer(l, q, nil)
		if !l.valid(time.Now()) {
			t.Fatal("lease not valid after a quorum confirmed")
		}
		<-q.asked // the next confirmation is under way when a transfer starts
		release := l.hold()
		if l.valid(time.Now()) {
			t.Fatal("lease valid after hold: a transfer would start under a lease")
		}
		q.answers <- nil // the confirmation from before the hold succeeds
		synctest.Wait()
		if l.valid(time.Now()) {
			t.Fatal("a confirmation started before the hold restored the lease")
		}
		l.valid(time.Now()) // ask again, as callers do
		<-q.asked
		q.answers <- nil // a confirmation during the transfer
		synctest.Wait()
		if l.valid(time.Now()) {
			t.Fatal("lease granted while a transfer is under way")
		}
		release()
		<-q.asked
		q.answers <- nil
		synctest.Wait()
		if !l.valid(time.Now()) {
			t.Fatal("lease not granted again once the transfer failed")
		}
	})
}

func TestLeaderLeaseRevoke(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, q := startLease(t)
		askAndAnswer(l, q, nil)
		l.revoke() // leadership lost
		if l.valid(time.Now()) {
			t.Fatal("lease valid after revoke")
		}
	})
}

func TestLeaderLeaseIdleConfirmsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, q := startLease(t)
		l.valid(time.Now()) // a caller asks for the lease
		<-q.asked
		q.answers <- nil
		time.Sleep(time.Second) // many ticks, nobody asks for the lease
		synctest.Wait()
		select {
		case <-q.asked:
			t.Fatal("an unused lease was confirmed: an idle leader writes barriers")
		default:
		}
		if l.valid(time.Now()) {
			t.Fatal("lease valid a second after its only confirmation")
		}
		<-q.asked // asking woke the loop
		q.answers <- nil
		synctest.Wait()
		if !l.valid(time.Now()) {
			t.Fatal("lease not confirmed again once asked for")
		}
	})
}

func TestLeaderLeaseBoundBelowHeartbeatTimeout(t *testing.T) {
	for _, hb := range []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 3 * time.Second} {
		// The lease must end before a follower that acknowledged the
		// confirmation votes again, even with both clocks 15% off.
		if b := leaseBound(hb); float64(b)*1.15 >= float64(hb)/1.15 {
			t.Errorf("heartbeat timeout %v: lease bound %v too long", hb, b)
		}
	}
}

func TestTransferRevokesLeaderLeaseFirst(t *testing.T) {
	leader, follower, _ := twoNodes(t)
	untilLeased(t, leader)
	leasedAtStart := make(chan bool, 8)
	leader.cfg.onTransfer = func() { leasedAtStart <- leader.LeaderLease() } // one per attempt
	untilLeading(t, "transfer leadership", func(ctx context.Context) error {
		return leader.TransferLeadership(ctx, follower.ID())
	})
	for len(leasedAtStart) > 0 {
		if <-leasedAtStart {
			t.Fatal("the leader held its lease when the transfer started")
		}
	}
	if leader.LeaderLease() {
		t.Fatal("the old leader holds a lease after the transfer")
	}
	untilLeased(t, follower)
}

// untilLeased asks n for its leader lease until it holds one.
func untilLeased(t *testing.T, n *Node) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for !n.LeaderLease() {
		select {
		case <-deadline:
			t.Fatalf("node %s holds no leader lease after 20s", n.ID())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// BenchmarkLeaderLeaseValid is what the lease adds to an answer from
// memory: the check every renewal makes, from many goroutines at once.
func BenchmarkLeaderLeaseValid(b *testing.B) {
	l := newLeaderLease(time.Hour, time.Now())
	l.confirmed(l.begin(), time.Now())
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !l.valid(time.Now()) {
				b.Fatal("lease lapsed")
			}
		}
	})
}
