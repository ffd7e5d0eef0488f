package robust

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

// The delivery workload: one client of the cluster registers n mailbox
// registrations; a generator per registration notifies its mailbox
// listener of events numbered 1, 2, 3…, each until the mailbox answers;
// a listener per registration receives them over a delivery stream — the
// client's one shared stream of the connection for most, a stream of its
// own (DeliveryOwnStream) for every third — and acknowledges what it got,
// opening another stream whenever one fails. The first registration's
// lease is cancelled in the middle of the run, so one member leaves the
// shared stream for good while the others go on. The registrations
// alternate between the principals, each principal's made and received
// by a client of its own (its client certificate). Each event names the
// registration and principal it was sent to (its handback), so an event
// reaching another registration's or another principal's listener is
// seen. CheckDeliveries judges the histories.

// deliveryWorkload runs n registrations until ctx ends and then until
// every stored event of a live registration is received or the run's
// grace ends.
func (r *Run) deliveryWorkload(ctx context.Context, n int) {
	addrs := make([]string, len(r.c.Nodes))
	for i, node := range r.c.Nodes {
		addrs[i] = node.ClientAddr()
	}
	var clients [principals]*client.Client
	for p := range principals {
		c, err := client.Dial(ctx, strings.Join(addrs, ","), client.WithTLS(r.c.Certs.clients[p]))
		if err != nil {
			r.log("delivery dial as %v: %v", p, err)
			return
		}
		defer c.Close()
		clients[p] = c
	}
	var wg sync.WaitGroup
	for i := range n {
		p := principalOf(i)
		c := clients[p]
		reg, err := r.registerMailbox(ctx, c)
		if err != nil {
			r.log("delivery register: %v", err)
			break
		}
		g := &RegLog{Name: fmt.Sprintf("s%d-r%d", r.seed, i), Principal: p.String(), Shared: i%3 != 2}
		r.deliveries.add(g)
		wg.Add(2)
		go func() { defer wg.Done(); r.generate(ctx, c, reg, g, i == 0) }()
		go func() { defer wg.Done(); r.listen(ctx, reg, g) }()
	}
	wg.Wait()
}

// registerMailbox registers, asking again while the cluster is away.
func (r *Run) registerMailbox(ctx context.Context, c *client.Client) (*client.MailboxRegistration, error) {
	for {
		reg, err := c.Mailbox().Register(ctx, time.Hour)
		if err == nil || djinn.IsDefinite(err) || ctx.Err() != nil {
			return reg, err
		}
		r.pause(ctx, 100*time.Millisecond)
	}
}

// generate notifies g's events in order, each until answered; with end,
// it cancels the registration's lease after a while and stops.
func (r *Run) generate(ctx context.Context, c *client.Client, reg *client.MailboxRegistration, g *RegLog, end bool) {
	src := djinn.Ref{Endpoint: "127.0.0.1:1", Service: djinn.NewID(), Object: djinn.NewID()}
	handback := []byte(g.Principal + "/" + g.Name)
	began := time.Now()
	for seq := int64(1); ctx.Err() == nil; seq++ {
		if end && time.Since(began) > 1500*time.Millisecond {
			r.endRegistration(ctx, c, reg, g)
			return
		}
		r.deliveries.update(func() { g.Sent = seq })
		for ctx.Err() == nil {
			err := client.Notify(ctx, c, reg.Listener, &client.RemoteEvent{Source: src, ID: 1, Seq: seq, Handback: handback})
			if err == nil {
				phase := r.phaseNow()
				r.deliveries.update(func() { g.Acked = append(g.Acked, Notified{Seq: seq, Phase: phase}) })
				break
			}
			if djinn.IsDefinite(err) {
				r.log("delivery notify %s seq %d: %v", g.Name, seq, err)
				r.count("delivery: notify refused")
				return
			}
			r.count("delivery: notify retried")
			r.pause(ctx, 20*time.Millisecond)
		}
		r.pause(ctx, 10*time.Millisecond)
	}
}

// endRegistration cancels g's lease, asking again while the cluster is
// away; an unknown lease is one an earlier answer that was lost cancelled.
func (r *Run) endRegistration(ctx context.Context, c *client.Client, reg *client.MailboxRegistration, g *RegLog) {
	phase := r.phaseNow()
	for r.grace.Err() == nil {
		err := reg.Lease.Cancel(r.grace, c)
		if err == nil || errors.Is(err, djinn.ErrUnknownLease) {
			r.deliveries.update(func() { g.Ended = phase })
			r.count("delivery: registrations ended")
			return
		}
		r.pause(r.grace, 50*time.Millisecond)
	}
	// Not known to be cancelled: it lives, and its events must come.
}

// listen receives g's events over one delivery stream after another until
// the work is over and nothing stored is missing, or the grace ends.
func (r *Run) listen(ctx context.Context, reg *client.MailboxRegistration, g *RegLog) {
	var opts []client.DeliveryOption
	if !g.Shared {
		opts = append(opts, client.DeliveryOwnStream())
	}
	var recorded uint64 // the highest acknowledgement the mailbox reported recorded
	for r.grace.Err() == nil {
		if r.deliveryDone(ctx, g) {
			return
		}
		sctx, cancel := context.WithCancel(r.grace)
		s, err := reg.Deliveries(sctx, opts...)
		if err != nil {
			cancel()
			r.count("delivery: stream refused")
			r.pause(r.grace, 50*time.Millisecond)
			continue
		}
		var stream int
		r.deliveries.update(func() { stream = len(g.Streams); g.Streams = append(g.Streams, recorded) })
		recorded = r.receive(ctx, s, cancel, g, stream, recorded)
		cancel()
		if r.registrationGone(g) {
			return
		}
		r.pause(r.grace, 50*time.Millisecond)
	}
}

// deliveryDone says the work is over and every stored event of g came.
func (r *Run) deliveryDone(ctx context.Context, g *RegLog) bool {
	return ctx.Err() != nil && r.deliveries.missing(g) == 0
}

func (r *Run) registrationGone(g *RegLog) bool {
	gone := false
	r.deliveries.update(func() { gone = g.Ended != "" })
	return gone
}

// receive records what stream s delivers and acknowledges it, until the
// stream fails, stays silent for two seconds while events are missing, or
// the workload is done; it returns the highest recorded acknowledgement
// the stream reported.
func (r *Run) receive(ctx context.Context, s *client.DeliveryStream, cancel func(), g *RegLog, stream int, recorded uint64) uint64 {
	got := make(chan struct{}, 1)
	stop := make(chan struct{})
	defer close(stop)
	go r.watchStream(ctx, g, got, stop, cancel)
	for {
		evs, err := s.Recv()
		recorded = max(recorded, s.Acknowledged())
		if err != nil {
			r.count(fmt.Sprintf("delivery: streams ended (%s)", streamEnd(ctx, err)))
			return recorded
		}
		select {
		case got <- struct{}{}:
		default:
		}
		phase := r.phaseNow()
		r.deliveries.update(func() {
			for _, e := range evs {
				from, principal := eventOrigin(e.Event.Handback)
				g.Got = append(g.Got, Delivered{Stream: stream, Index: e.Index, Seq: e.Event.Seq, From: from, Principal: principal, Phase: phase})
			}
		})
		if len(evs) > 0 {
			_ = s.Ack(evs[len(evs)-1].Index) // a lost acknowledgement only brings the events again
		}
	}
}

// watchStream cancels a stream that is silent for two seconds while
// events are missing, or once the workload is done.
func (r *Run) watchStream(ctx context.Context, g *RegLog, got, stop <-chan struct{}, cancel func()) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-got:
			last = time.Now()
		case <-tick.C:
			if r.deliveryDone(ctx, g) || (time.Since(last) > 2*time.Second && r.deliveries.missing(g) > 0) {
				cancel()
				return
			}
		}
	}
}

// streamEnd names why a stream ended, for the counts.
func streamEnd(ctx context.Context, err error) string {
	switch {
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return "work over"
	case errors.Is(err, context.Canceled):
		return "silent or done"
	}
	return string(djinn.KindOf(err))
}

// eventOrigin splits a handback "principal/registration".
func eventOrigin(handback []byte) (from, principal string) {
	p, f, ok := strings.Cut(string(handback), "/")
	if !ok {
		return string(handback), ""
	}
	return f, p
}
