package robust

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The mailbox workload: a producer notifies a registration's mailbox
// listener of events numbered 1, 2, 3…, each sent again until it is
// acknowledged (so some are stored twice), and a consumer pulls them,
// resuming after the last index it saw on whichever member leads, and
// acknowledges what it pulled. CheckMailbox judges what was pulled
// against what was acknowledged.

// MailboxLog is what the mailbox workload saw.
type MailboxLog struct {
	mu     sync.Mutex
	acked  []int64     // sequence numbers whose Notify was answered, guarded by mu
	sent   int64       // the highest sequence number sent, guarded by mu
	pulled []pulledEvt // in the order pulled, guarded by mu
}

type pulledEvt struct {
	Index uint64
	Seq   int64
}

func (l *MailboxLog) send(seq int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent = max(l.sent, seq)
}

func (l *MailboxLog) ack(seq int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked = append(l.acked, seq)
}

func (l *MailboxLog) pull(e pulledEvt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pulled = append(l.pulled, e)
}

// ops is how many events were sent and pulled.
func (l *MailboxLog) ops() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.sent) + len(l.pulled)
}

// missing returns how many acknowledged events have not been pulled.
func (l *MailboxLog) missing() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[int64]bool{}
	for _, p := range l.pulled {
		seen[p.Seq] = true
	}
	n := 0
	for _, s := range l.acked {
		if !seen[s] {
			n++
		}
	}
	return n
}

// CheckMailbox checks that every acknowledged event was pulled, that none
// was pulled that was never sent, and that order was kept: an event pulled
// again (at least once) repeats a sequence number already pulled; a new
// one has a sequence number above every one before it.
func CheckMailbox(l *MailboxLog) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var v []string
	seen := map[int64]bool{}
	var top int64
	dups := 0
	for i, p := range l.pulled {
		switch {
		case p.Seq < 1 || p.Seq > l.sent:
			v = append(v, fmt.Sprintf("event %d pulled (index %d) but never sent", p.Seq, p.Index))
		case seen[p.Seq]:
			dups++
		case p.Seq < top:
			v = append(v, fmt.Sprintf("event %d pulled after event %d (index %d, pull %d): out of order", p.Seq, top, p.Index, i))
		}
		seen[p.Seq] = true
		top = max(top, p.Seq)
	}
	for _, s := range l.acked {
		if !seen[s] {
			v = append(v, fmt.Sprintf("event %d acknowledged but never pulled", s))
		}
	}
	return v
}

// mailboxWorkload registers, then runs the producer and the consumer
// until ctx ends and then until every acknowledged event is pulled or the
// run's grace ends.
func (r *Run) mailboxWorkload(ctx context.Context) {
	caller := NewCaller(r.c, 0)
	var reg *djinnpb.MailboxRegistration
	if _, err := caller.Call(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		got, err := djinnpb.NewEventMailboxClient(cc).Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Hour)})
		reg = got
		return err
	}); err != nil {
		r.log("mailbox register: %v", err)
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.produce(ctx, reg) }()
	r.consume(ctx, reg)
	wg.Wait()
}

// produce notifies events in order, each until answered.
func (r *Run) produce(ctx context.Context, reg *djinnpb.MailboxRegistration) {
	caller := NewCaller(r.c, 1)
	src := &djinnpb.Ref{Endpoint: "127.0.0.1:1", ServiceId: []byte("robust-producer0"), ObjectId: []byte("robust-source-00")}
	for seq := int64(1); ctx.Err() == nil; seq++ {
		req := &djinnpb.NotifyRequest{ListenerId: reg.Listener.ObjectId,
			Event: &djinnpb.RemoteEvent{Source: src, EventId: 1, Sequence: seq, Handback: []byte("robust")}}
		r.mailbox.send(seq)
		for ctx.Err() == nil {
			o, _ := caller.Call(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
				_, err := djinnpb.NewEventListenerClient(cc).Notify(ctx, req)
				return err
			})
			if o == Done {
				r.mailbox.ack(seq)
				break
			}
			r.count("mailbox notify retried")
		}
		r.pause(ctx, 10*time.Millisecond)
	}
}

// consume pulls after the last index seen, on whichever member answers,
// acknowledging as it goes; a stream that stays silent for a second is
// dropped for another.
func (r *Run) consume(ctx context.Context, reg *djinnpb.MailboxRegistration) {
	caller := NewCaller(r.c, 2)
	var after uint64
	for {
		if ctx.Err() != nil && (r.mailbox.missing() == 0 || r.grace.Err() != nil) {
			return
		}
		pctx, cancel := context.WithCancel(r.grace)
		var stream djinnpb.EventMailbox_PullClient
		o, _ := caller.Call(pctx, func(_ context.Context, cc *grpc.ClientConn) error {
			var err error
			stream, err = djinnpb.NewEventMailboxClient(cc).Pull(pctx, &djinnpb.PullRequest{RegistrationId: reg.RegistrationId, AfterIndex: after})
			if err == nil {
				_, err = stream.Header() // the member answered, or refused
			}
			return err
		})
		if o != Done {
			cancel()
			r.pause(r.grace, 50*time.Millisecond)
			continue
		}
		after = r.drain(ctx, stream, cancel, after, reg.RegistrationId)
		cancel()
		caller.next = (caller.next + 1) % len(caller.nodes)
	}
}

// drain reads the stream until it fails or is silent for a second, and
// returns the last index pulled.
func (r *Run) drain(ctx context.Context, stream djinnpb.EventMailbox_PullClient, cancel func(), after uint64, reg []byte) uint64 {
	msgs := make(chan *djinnpb.PullResponse)
	go func() {
		defer close(msgs)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			msgs <- m
		}
	}()
	defer func() {
		cancel()
		for range msgs {
		}
	}()
	acked := after
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				return after
			}
			for _, e := range m.Events {
				r.mailbox.pull(pulledEvt{Index: e.Index, Seq: e.Event.GetSequence()})
				after = max(after, e.Index)
			}
			if after >= acked+50 {
				r.ackThrough(reg, after)
				acked = after
			}
		case <-time.After(time.Second):
			return after
		}
		if ctx.Err() != nil && r.mailbox.missing() == 0 {
			return after
		}
	}
}

// ackThrough acknowledges through index, once, without waiting: an
// acknowledgement that is lost only leaves events stored. The
// registration is Alice's, the consumer's.
func (r *Run) ackThrough(reg []byte, index uint64) {
	for _, n := range r.c.Nodes {
		if !n.Up() {
			continue
		}
		actx, cancel := context.WithTimeout(r.grace, 300*time.Millisecond)
		_, err := djinnpb.NewEventMailboxClient(n.Conn(Alice)).Ack(actx, &djinnpb.AckRequest{RegistrationId: reg, ThroughIndex: index})
		cancel()
		if err == nil {
			return
		}
	}
}
