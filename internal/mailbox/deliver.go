package mailbox

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/event"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// deliverer is the leader's Sink: it turns state changes into delivery
// engine work, in log order for each registration, and reports delivery
// outcomes back through the log. Registrations are served apart: one whose
// retarget waits for its old target to confirm it stopped (EM.4.1) holds
// up no other.
type deliverer struct {
	state  *State
	engine *event.Engine
	log    Proposer
	logger *slog.Logger
	ops    event.Serial // the work of each registration, in log order

	mu sync.Mutex
	// targets, acks and failures are guarded by mu.
	targets map[djinn.ID]*djinnpb.Ref
	epochs  map[djinn.ID]uint64 // the delivery epoch each target belongs to
	acks    map[djinn.ID]uint64
	// through is, per registration, the last index delivered in this term:
	// events up to it are not sent again when the target changes before the
	// delivery is recorded in the log.
	through map[djinn.ID]uint64
	// stopped marks registrations whose delivery a definite failure
	// stopped: until the disable is applied (or the client sets a target
	// again), new events are not pushed, so no later delivery can be
	// recorded past the events that were not delivered.
	stopped  map[djinn.ID]bool
	failures []*statepb.Command
	// streams are the delivery streams with an acknowledgement to record:
	// they share the command that records push deliveries.
	streams []*stream
	report  chan struct{} // signalled when acks, failures or streams grow
	// ended is closed when the term ends (when endTerm cancels endedCtx):
	// delivery streams served in it end too, and their clients reconnect
	// to the next leader.
	ended    <-chan struct{}
	endedCtx context.Context
	endTerm  context.CancelFunc
}

var _ Sink = (*deliverer)(nil)

func newDeliverer(s *State, log Proposer, logger *slog.Logger, ec event.Config) *deliverer {
	d := &deliverer{
		state: s, log: log, logger: logger,
		targets: map[djinn.ID]*djinnpb.Ref{}, epochs: map[djinn.ID]uint64{}, acks: map[djinn.ID]uint64{}, through: map[djinn.ID]uint64{},
		stopped: map[djinn.ID]bool{},
		report:  make(chan struct{}, 1),
	}
	d.endedCtx, d.endTerm = context.WithCancel(context.Background())
	d.ended = d.endedCtx.Done()
	ec.OnDelivered = d.delivered
	ec.OnFailure = d.failed
	d.engine = event.New(ec)
	return d
}

// run delivers until ctx ends, then detaches from the state and stops the
// engine.
func (d *deliverer) run(ctx context.Context) {
	d.state.SetSink(d)
	d.reportLoop(ctx)
	d.endTerm()
	d.state.SetSink(nil)
	// The sink is detached, so nothing is queued after this; closing the
	// engine ends the Sends that work in progress waits for. Anyone waiting
	// for a retarget on this leader is released: the change is in the log,
	// and the next leader starts from it.
	d.engine.Close()
	d.ops.Wait()
}

func toRef(r *djinnpb.Ref) djinn.Ref {
	var out djinn.Ref
	out.Endpoint = r.GetEndpoint()
	copy(out.Service[:], r.GetServiceId())
	copy(out.Object[:], r.GetObjectId())
	return out
}

func items(events []Stored) []event.Item {
	out := make([]event.Item, len(events))
	for i, e := range events {
		out[i] = event.Item{Cursor: e.Index, Event: e.Event}
	}
	return out
}

// Stored implements Sink.
//
// It queues the event for delivery on the caller's goroutine (the apply
// of its command) unless the registration has earlier work still under
// way: the common event then costs no hand-off on its way to the engine.
func (d *deliverer) Stored(reg djinn.ID, target *djinnpb.Ref, epoch uint64, ev Stored) {
	d.ops.Do(reg, func() {
		d.mu.Lock()
		stopped := d.stopped[reg]
		if d.targets[reg] == nil {
			d.targets[reg], d.epochs[reg] = target, epoch // a target set in an earlier term
		}
		d.mu.Unlock()
		if stopped {
			return
		}
		if err := d.engine.Push(reg, toRef(target), event.Item{Cursor: ev.Index, Event: ev.Event}); err != nil {
			d.logger.Warn("mailbox: queueing delivery failed", "registration", wire.Fingerprint(reg), "err", err)
		}
	})
}

// Retargeted implements Sink.
func (d *deliverer) Retargeted(reg djinn.ID, target *djinnpb.Ref, epoch uint64, events []Stored, done chan struct{}) {
	d.ops.Add(reg, func() {
		d.engine.Drop(reg)
		d.mu.Lock()
		if target == nil {
			delete(d.targets, reg)
			delete(d.epochs, reg)
		} else {
			d.targets[reg], d.epochs[reg] = target, epoch
		}
		delete(d.stopped, reg)
		sent := d.through[reg]
		d.mu.Unlock()
		for len(events) > 0 && events[0].Index <= sent {
			events = events[1:]
		}
		if target != nil && len(events) > 0 {
			if err := d.engine.Push(reg, toRef(target), items(events)...); err != nil {
				d.logger.Warn("mailbox: queueing delivery failed", "registration", wire.Fingerprint(reg), "err", err)
			}
		}
		if done != nil {
			close(done)
		}
	})
}

// Forgot implements Sink.
func (d *deliverer) Forgot(reg djinn.ID, match func(Stored) bool) {
	d.ops.Do(reg, func() {
		d.engine.Discard(reg, func(it event.Item) bool { return match(Stored{Index: it.Cursor, Event: it.Event}) })
	})
}

// Removed implements Sink.
func (d *deliverer) Removed(reg djinn.ID) {
	d.ops.Add(reg, func() {
		d.engine.Drop(reg)
		d.mu.Lock()
		delete(d.targets, reg)
		delete(d.epochs, reg)
		delete(d.acks, reg)
		delete(d.through, reg)
		delete(d.stopped, reg)
		d.mu.Unlock()
	})
}

func (d *deliverer) delivered(reg djinn.ID, through uint64) {
	d.mu.Lock()
	if through > d.acks[reg] {
		d.acks[reg] = through
	}
	if through > d.through[reg] {
		d.through[reg] = through
	}
	d.mu.Unlock()
	d.signalReport()
}

func (d *deliverer) signalReport() {
	select {
	case d.report <- struct{}{}:
	default:
	}
}

// failed decides what a failed delivery does (EM.4.1): an UnknownEvent
// puts the event's kind on the unknown-event list and skips it; another
// definite failure disables delivery; indefinite failures are retried.
func (d *deliverer) failed(reg djinn.ID, it event.Item, err error) event.Action {
	switch {
	case djinn.KindOf(err) == djinn.UnknownEvent:
		d.mu.Lock()
		d.failures = append(d.failures, &statepb.Command{Op: &statepb.Command_MailboxUnknown{MailboxUnknown: &statepb.MailboxUnknown{
			RegistrationId: reg[:],
			Keys:           []*djinnpb.EventKey{{Source: it.Event.GetSource(), EventId: it.Event.GetEventId()}},
		}}})
		d.mu.Unlock()
		d.signalReport()
		return event.Skip
	case djinn.IsDefinite(err):
		d.mu.Lock()
		epoch := d.epochs[reg]
		d.stopped[reg] = true
		d.failures = append(d.failures, &statepb.Command{Op: &statepb.Command_MailboxDisable{MailboxDisable: &statepb.MailboxDisable{
			RegistrationId: reg[:], DeliveryFailed: true, OnlyIfEpoch: epoch,
		}}})
		d.mu.Unlock()
		d.logger.Info("mailbox delivery disabled by a definite failure", "registration", wire.Fingerprint(reg), "err", err)
		d.signalReport()
		return event.Stop
	}
	return event.Retry
}

// reportLoop logs delivery outcomes: forgets delivered events (pushed to
// a target, or acknowledged on a delivery stream) in one command per round
// and records failures. What could not be recorded is
// kept and tried again after a pause.
func (d *deliverer) reportLoop(ctx context.Context) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.report:
		case <-retry.C:
		}
		d.mu.Lock()
		acks, failures, streams := d.acks, d.failures, d.streams
		d.acks, d.failures, d.streams = map[djinn.ID]uint64{}, nil, nil
		for _, st := range streams {
			st.queued = false
		}
		d.mu.Unlock()
		if !d.recordDelivered(ctx, acks, streams) {
			if ctx.Err() != nil {
				return
			}
			retry.Reset(100 * time.Millisecond)
		}
		var unrecorded []*statepb.Command
		for _, c := range failures {
			if _, err := d.log.Propose(ctx, c); err != nil {
				if ctx.Err() != nil {
					return
				}
				if djinn.KindOf(err) == djinn.NoSuchObject {
					continue // the registration is gone: nothing to record
				}
				d.logger.Warn("mailbox: recording a delivery failure failed; will retry", "err", err)
				unrecorded = append(unrecorded, c)
			}
		}
		if len(unrecorded) > 0 {
			d.mu.Lock()
			d.failures = append(unrecorded, d.failures...)
			d.mu.Unlock()
			retry.Reset(100 * time.Millisecond)
		}
	}
}

// streamAcked queues a delivery stream's acknowledgement for the next
// round of reportLoop.
func (d *deliverer) streamAcked(st *stream) {
	d.mu.Lock()
	if !st.queued {
		st.queued = true
		d.streams = append(d.streams, st)
	}
	d.mu.Unlock()
	d.signalReport()
}

// recordDelivered records, in one command, the pushed deliveries and the
// acknowledgements the streams received by now, and tells the streams.
// Pushed deliveries that could not be recorded are kept for the next
// round (false); a stream whose acknowledgement could not be recorded
// fails, and its client opens another.
func (d *deliverer) recordDelivered(ctx context.Context, acks map[djinn.ID]uint64, streams []*stream) bool {
	c := &statepb.MailboxDelivered{Entries: make([]*statepb.Delivered, 0, len(acks)+len(streams))}
	for reg, through := range acks {
		c.Entries = append(c.Entries, &statepb.Delivered{RegistrationId: reg[:], ThroughIndex: through})
	}
	throughs := make([]uint64, len(streams))
	for i, st := range streams {
		if through, ok := st.toRecord(); ok {
			throughs[i] = through
			c.Entries = append(c.Entries, &statepb.Delivered{RegistrationId: st.id[:], ThroughIndex: through})
		}
	}
	if len(c.Entries) == 0 {
		return true
	}
	// The record rides in the next entry proposed (or goes alone after the
	// log's rider delay) rather than costing an append and an fsync of its
	// own: recorded a little later, a delivery is at worst delivered again
	// after a crash, which delivery at least once allows. The streams are
	// told of their acknowledgements once recorded, never before.
	_, err := d.log.ProposeRider(ctx, &statepb.Command{Op: &statepb.Command_MailboxDelivered{MailboxDelivered: c}})
	streamErr := err
	if err != nil && ctx.Err() != nil {
		// The term ended: the streams end as every stream of the term does,
		// and their clients open others at the next leader.
		streamErr = termEnded()
	}
	for i, st := range streams {
		if throughs[i] > 0 {
			st.recordedThrough(throughs[i], streamErr)
		}
	}
	if err == nil {
		return true
	}
	if ctx.Err() == nil {
		d.logger.Warn("mailbox: recording deliveries failed; will retry", "err", err)
	}
	d.mu.Lock()
	for reg, through := range acks {
		if through > d.acks[reg] {
			d.acks[reg] = through
		}
	}
	d.mu.Unlock()
	return len(acks) == 0
}
