package server_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// generator stands for an event generator: it sends its events, numbered
// in order, to the listeners it is given, as EV.2.3.1's notify.
type generator struct {
	c   client.Connector
	src djinn.Ref
	seq map[int64]int64 // last sequence number per event id
}

func newGenerator(c client.Connector) *generator {
	return &generator{c: c, src: djinn.Ref{Endpoint: "127.0.0.1:1", Service: djinn.NewID(), Object: djinn.NewID()}, seq: map[int64]int64{}}
}

// notify sends the next event of kind id to target.
func (g *generator) notify(ctx context.Context, target djinn.Ref, id int64) (*client.RemoteEvent, error) {
	g.seq[id]++
	ev := &client.RemoteEvent{Source: g.src, ID: id, Seq: g.seq[id], Handback: []byte("handback")}
	return ev, client.Notify(ctx, g.c, target, ev)
}

// mustNotify sends the next event of kind id and fails the test if the
// listener refuses it.
func (g *generator) mustNotify(t *testing.T, target djinn.Ref, id int64) *client.RemoteEvent {
	t.Helper()
	ev, err := g.notify(testContext(t), target, id)
	if err != nil {
		t.Fatalf("notify event %d seq %d: %v", id, ev.Seq, err)
	}
	return ev
}

// inbox is a listener hosted by the test: it hands the events it is sent to
// the test, and refuses those refuse picks (if not nil) with UnknownEvent.
type inbox struct {
	l      *client.Listener
	events chan *client.RemoteEvent
	last   map[eventKind]int64 // the last sequence number received, by kind
}

type eventKind struct {
	source djinn.Ref
	id     int64
}

func kindOf(ev *client.RemoteEvent) eventKind {
	return eventKind{djinn.Ref{Service: ev.Source.Service, Object: ev.Source.Object}, ev.ID}
}

func newInbox(t *testing.T, refuse func(*client.RemoteEvent) bool) *inbox {
	t.Helper()
	in := &inbox{events: make(chan *client.RemoteEvent, 1024), last: map[eventKind]int64{}}
	l, err := client.Listen(t.Context(), "127.0.0.1:0", func(ctx context.Context, ev *client.RemoteEvent) error {
		if refuse != nil && refuse(ev) {
			return djinn.ErrUnknownEvent
		}
		in.events <- ev
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	in.l = l
	return in
}

// expect waits for the events, in order. Delivery is at least once
// (internal/mailbox's doc): an event of the same kind older than the one
// awaited is a redelivery, which listeners tell by its sequence number and
// ignore; any other event fails the test.
func (in *inbox) expect(t *testing.T, want ...*client.RemoteEvent) {
	t.Helper()
	timeout := time.NewTimer(servertest.Timeout)
	defer timeout.Stop()
	for _, w := range want {
		for matched := false; !matched; {
			select {
			case got := <-in.events:
				switch {
				case kindOf(got) == kindOf(w) && got.Seq == w.Seq:
					if string(got.Handback) != string(w.Handback) {
						t.Fatalf("event %d seq %d: handback %q, want %q", got.ID, got.Seq, got.Handback, w.Handback)
					}
					in.last[kindOf(got)] = got.Seq
					matched = true
				case kindOf(got) == kindOf(w) && got.Seq < w.Seq:
					t.Logf("redelivered: event %d seq %d", got.ID, got.Seq)
				default:
					t.Fatalf("received event %d seq %d from %v, want event %d seq %d from %v", got.ID, got.Seq, got.Source, w.ID, w.Seq, w.Source)
				}
			case <-timeout.C:
				t.Fatalf("waited %v for event %d seq %d", servertest.Timeout, w.ID, w.Seq)
			}
		}
	}
}

// empty checks that no new event has arrived (redeliveries aside).
func (in *inbox) empty(t *testing.T) {
	t.Helper()
	for {
		select {
		case ev := <-in.events:
			if ev.Seq > in.last[kindOf(ev)] {
				t.Fatalf("unexpected event %d seq %d", ev.ID, ev.Seq)
			}
			t.Logf("redelivered: event %d seq %d", ev.ID, ev.Seq)
		default:
			return
		}
	}
}

// mailboxFixture is a server with its mailbox, a client and a generator.
type mailboxFixture struct {
	srv *server.Server
	c   *client.Client
	mb  *client.Mailbox
	gen *generator
}

func newMailboxFixture(t *testing.T, configure func(*server.Config)) *mailboxFixture {
	t.Helper()
	cfg := servertest.Config(t)
	if configure != nil {
		configure(&cfg)
	}
	srv := servertest.Start(t, cfg)
	c := servertest.Dial(t, srv.Addr())
	return &mailboxFixture{srv: srv, c: c, mb: c.Mailbox(), gen: newGenerator(c)}
}

func (f *mailboxFixture) register(t *testing.T) *client.MailboxRegistration {
	t.Helper()
	reg, err := f.mb.Register(testContext(t), time.Minute)
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	return reg
}

// read reads a registration back from the mailbox.
func (f *mailboxFixture) read(t *testing.T, reg *client.MailboxRegistration) *client.MailboxRegistration {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
	defer cancel()
	r, err := f.mb.Registration(ctx, reg.ID)
	if err != nil {
		t.Fatalf("get registration: %v", err)
	}
	return r
}

// drained waits until the mailbox has forgotten every delivered event of
// reg: acknowledgements are logged after delivery, in the background.
func (f *mailboxFixture) drained(t *testing.T, reg *client.MailboxRegistration) {
	t.Helper()
	servertest.Eventually(t, "delivered events to be forgotten", func() bool { return f.read(t, reg).Stored == 0 })
}

func (f *mailboxFixture) enable(t *testing.T, reg *client.MailboxRegistration, target djinn.Ref) {
	t.Helper()
	if err := reg.EnableDelivery(testContext(t), target); err != nil {
		t.Fatalf("enable delivery to %v: %v", target, err)
	}
}

// TestMailboxDelivery follows a registration through EM.4.1: events a
// generator sends to the mailbox listener are stored while delivery is
// off, and forwarded in arrival order once it is on.
func TestMailboxDelivery(t *testing.T) {
	t.Parallel()
	f := newMailboxFixture(t, nil)
	reg := f.register(t)
	in := newInbox(t, nil)

	stored := []*client.RemoteEvent{f.gen.mustNotify(t, reg.Listener, 1), f.gen.mustNotify(t, reg.Listener, 1), f.gen.mustNotify(t, reg.Listener, 1)}
	if r := f.read(t, reg); r.Stored != 3 || !r.Target.IsZero() {
		t.Fatalf("before delivery: %d stored, target %v; want 3 stored, no target", r.Stored, r.Target)
	}

	f.enable(t, reg, in.l.Ref())
	in.expect(t, stored...)
	in.expect(t, f.gen.mustNotify(t, reg.Listener, 1), f.gen.mustNotify(t, reg.Listener, 1))
	f.drained(t, reg)
	if r := f.read(t, reg); !r.Target.Equal(in.l.Ref()) {
		t.Errorf("target %v, want %v", r.Target, in.l.Ref())
	}

	t.Run("EM.4.1 disabled delivery stores events until enabled again", func(t *testing.T) {
		if err := reg.DisableDelivery(testContext(t)); err != nil {
			t.Fatal(err)
		}
		held := []*client.RemoteEvent{f.gen.mustNotify(t, reg.Listener, 1), f.gen.mustNotify(t, reg.Listener, 1)}
		if r := f.read(t, reg); r.Stored != 2 || !r.Target.IsZero() {
			t.Fatalf("disabled: %d stored, target %v; want 2 stored, no target", r.Stored, r.Target)
		}
		in.empty(t)
		if err := reg.DisableDelivery(testContext(t)); err != nil {
			t.Errorf("EM.4.1 disabling twice is fine: %v", err)
		}
		f.enable(t, reg, in.l.Ref())
		in.expect(t, held...)
		f.drained(t, reg)
	})
	t.Run("EM.4.1 enabling a zero target disables delivery", func(t *testing.T) {
		f.enable(t, reg, djinn.Ref{})
		ev := f.gen.mustNotify(t, reg.Listener, 1)
		if r := f.read(t, reg); r.Stored != 1 || !r.Target.IsZero() {
			t.Fatalf("%d stored, target %v; want 1 stored, no target", r.Stored, r.Target)
		}
		f.enable(t, reg, in.l.Ref())
		in.expect(t, ev)
		f.drained(t, reg)
	})
	t.Run("EM.4.1 enabling replaces the target", func(t *testing.T) {
		other := newInbox(t, nil)
		f.enable(t, reg, other.l.Ref())
		other.expect(t, f.gen.mustNotify(t, reg.Listener, 1))
		in.empty(t)
		f.enable(t, reg, in.l.Ref())
	})
}

// TestMailboxUnknownEvent: EM.4.1's unknown-event list. A target that
// answers UnknownEvent for a kind of event puts that (source, id) on the
// list; generators then get UnknownEvent for it, other kinds still flow,
// and re-enabling delivery clears the list.
func TestMailboxUnknownEvent(t *testing.T) {
	t.Parallel()
	f := newMailboxFixture(t, nil)
	reg := f.register(t)
	const wanted, unwanted = 1, 2
	in := newInbox(t, func(ev *client.RemoteEvent) bool { return ev.Source.Equal(f.gen.src) && ev.ID == unwanted })
	f.enable(t, reg, in.l.Ref())

	f.gen.mustNotify(t, reg.Listener, unwanted)
	key := client.EventKey{Source: f.gen.src, ID: unwanted}
	servertest.Eventually(t, "the refused event on the unknown-event list", func() bool {
		return slices.ContainsFunc(f.read(t, reg).Unknown, func(k client.EventKey) bool { return k.Source.Equal(key.Source) && k.ID == key.ID })
	})
	if _, err := f.gen.notify(testContext(t), reg.Listener, unwanted); !errors.Is(err, djinn.ErrUnknownEvent) {
		t.Fatalf("notify of a refused kind: %v, want unknown event", err)
	}
	other := newGenerator(f.c)
	in.expect(t, f.gen.mustNotify(t, reg.Listener, wanted), other.mustNotify(t, reg.Listener, unwanted))

	f.enable(t, reg, in.l.Ref())
	if u := f.read(t, reg).Unknown; len(u) != 0 {
		t.Errorf("after re-enabling: unknown events %v, want none", u)
	}
	if _, err := f.gen.notify(testContext(t), reg.Listener, unwanted); err != nil {
		t.Errorf("notify of the once-refused kind after re-enabling: %v", err)
	}
}

// TestMailboxPull: pull mode streams stored events with their indices;
// they stay until acknowledged, and new ones arrive on the open stream.
func TestMailboxPull(t *testing.T) {
	t.Parallel()
	f := newMailboxFixture(t, nil)
	reg := f.register(t)
	sent := []*client.RemoteEvent{f.gen.mustNotify(t, reg.Listener, 1), f.gen.mustNotify(t, reg.Listener, 1), f.gen.mustNotify(t, reg.Listener, 1)}

	pull := func(after uint64, n int, between func()) []client.StoredEvent {
		t.Helper()
		var got []client.StoredEvent
		for se, err := range reg.Pull(testContext(t), after) {
			if err != nil {
				t.Fatalf("pull after %d: %v", after, err)
			}
			got = append(got, se)
			if between != nil {
				between()
			}
			if len(got) == n {
				break
			}
		}
		return got
	}
	got := pull(0, 3, nil)
	for i, se := range got {
		if se.Event.Seq != sent[i].Seq || (i > 0 && se.Index <= got[i-1].Index) {
			t.Fatalf("pulled %d: seq %d index %d; want seq %d, indices increasing", i, se.Event.Seq, se.Index, sent[i].Seq)
		}
	}
	if again := pull(0, 3, nil); again[2].Index != got[2].Index {
		t.Errorf("pulling again from 0 ends at index %d, want %d: pulled events stay until acknowledged", again[2].Index, got[2].Index)
	}
	if err := reg.Ack(testContext(t), got[1].Index); err != nil {
		t.Fatal(err)
	}
	if r := f.read(t, reg); r.Stored != 1 {
		t.Errorf("after ack through the second: %d stored, want 1", r.Stored)
	}

	var live *client.RemoteEvent
	rest := pull(0, 2, func() {
		if live == nil {
			live = f.gen.mustNotify(t, reg.Listener, 1)
		}
	})
	if rest[0].Event.Seq != sent[2].Seq || rest[1].Event.Seq != live.Seq || rest[1].Index <= rest[0].Index {
		t.Errorf("after ack: pulled seqs %d, %d; want %d then the live event %d", rest[0].Event.Seq, rest[1].Event.Seq, sent[2].Seq, live.Seq)
	}
	if resumed := pull(rest[0].Index, 1, nil); resumed[0].Index != rest[1].Index {
		t.Errorf("resume after index %d gave index %d, want %d", rest[0].Index, resumed[0].Index, rest[1].Index)
	}
}

// TestMailboxRegistrationEnded: EM.4 and EM.4.1 — once its lease is
// cancelled, every call on a registration and on its mailbox listener is
// NoSuchObject.
func TestMailboxRegistrationEnded(t *testing.T) {
	t.Parallel()
	f := newMailboxFixture(t, nil)
	reg := f.register(t)
	in := newInbox(t, nil)
	f.gen.mustNotify(t, reg.Listener, 1)
	if err := reg.Lease.Cancel(testContext(t), f.c); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"EM.4.1 notify on the mailbox listener", func(ctx context.Context) error {
			_, err := f.gen.notify(ctx, reg.Listener, 1)
			return err
		}},
		{"EM.4 get the registration", func(ctx context.Context) error {
			_, err := f.mb.Registration(ctx, reg.ID)
			return err
		}},
		{"EM.4 enable delivery", func(ctx context.Context) error { return reg.EnableDelivery(ctx, in.l.Ref()) }},
		{"EM.4 disable delivery", func(ctx context.Context) error { return reg.DisableDelivery(ctx) }},
		{"EM.4 pull", func(ctx context.Context) error {
			for _, err := range reg.Pull(ctx, 0) {
				return err
			}
			return nil
		}},
		{"EM.4 ack", func(ctx context.Context) error { return reg.Ack(ctx, 1) }},
		{"EM.4 add unknown events", func(ctx context.Context) error {
			return reg.AddUnknownEvents(ctx, client.EventKey{Source: f.gen.src, ID: 1})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErr(t, tt.name, tt.call(testContext(t)), djinn.ErrNoSuchObject, "")
		})
	}
	t.Run("LE.2.2 renew the ended lease", func(t *testing.T) {
		wantErr(t, "renew", reg.Lease.Renew(testContext(t), f.c, djinn.Any), djinn.ErrUnknownLease, "")
	})
}

// TestMailboxArguments: the mailbox's argument rules, enforced by the
// server (the raw gRPC client skips the client library's own checks).
func TestMailboxArguments(t *testing.T) {
	t.Parallel()
	f := newMailboxFixture(t, func(c *server.Config) { c.Mailbox.MaxEventBytes = 1024 })
	reg, other := f.register(t), f.register(t)
	raw := djinnpb.NewEventMailboxClient(f.c.ClientConn())
	tests := []struct {
		name string
		call func(ctx context.Context) error
		text string
	}{
		{"EM.3 a zero lease duration is illegal", func(ctx context.Context) error {
			_, err := raw.Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: 0})
			return err
		}, "lease duration 0"},
		{"EM.3 a negative lease duration other than ANY is illegal", func(ctx context.Context) error {
			_, err := raw.Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(-3 * time.Second)})
			return err
		}, "lease duration -3s"},
		{"EM.4.1 the registration's own mailbox listener cannot be its target", func(ctx context.Context) error {
			return reg.EnableDelivery(ctx, reg.Listener)
		}, "cannot be a delivery target"},
		{"EM.4.1 another mailbox listener of this mailbox cannot be a target", func(ctx context.Context) error {
			return reg.EnableDelivery(ctx, other.Listener)
		}, "cannot be a delivery target"},
		{"a target without an endpoint is illegal", func(ctx context.Context) error {
			return reg.EnableDelivery(ctx, djinn.Ref{Service: djinn.NewID(), Object: djinn.NewID()})
		}, "target"},
		{"a registration id that is not 128 bits is illegal", func(ctx context.Context) error {
			_, err := raw.GetRegistration(ctx, &djinnpb.MailboxRegistrationRequest{RegistrationId: []byte{1}})
			return err
		}, "registration id"},
		{"an event larger than the mailbox takes is illegal", func(ctx context.Context) error {
			return client.Notify(ctx, f.c, reg.Listener, &client.RemoteEvent{Source: f.gen.src, ID: 1, Seq: 1, Handback: make([]byte, 2048)})
		}, "bytes"},
		{"an event without a source is illegal", func(ctx context.Context) error {
			_, err := djinnpb.NewEventListenerClient(f.c.ClientConn()).Notify(ctx, &djinnpb.NotifyRequest{
				ListenerId: idBytes(reg.Listener.Object), Event: &djinnpb.RemoteEvent{EventId: 1},
			})
			return err
		}, "event source"},
		{"a pull batch above 4096 is illegal", func(ctx context.Context) error {
			s, err := raw.Pull(ctx, &djinnpb.PullRequest{RegistrationId: idBytes(reg.ID), MaxBatch: 5000})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, "pull batch 5000"},
		{"a negative pull batch is illegal, not the default", func(ctx context.Context) error {
			s, err := raw.Pull(ctx, &djinnpb.PullRequest{RegistrationId: idBytes(reg.ID), MaxBatch: -1})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, "pull batch -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErr(t, tt.name, tt.call(testContext(t)), djinn.ErrInvalidArgument, tt.text)
		})
	}
	if r := f.read(t, reg); !r.Target.IsZero() || r.Stored != 0 {
		t.Errorf("refused calls changed the registration: target %v, %d stored", r.Target, r.Stored)
	}
}

// TestMailboxMaxStored: a registration holding Config.Mailbox.MaxStored
// events refuses more with RESOURCE_EXHAUSTED, without harm to the
// others, and takes events again once some are acknowledged.
func TestMailboxMaxStored(t *testing.T) {
	t.Parallel()
	const max = 3
	f := newMailboxFixture(t, func(c *server.Config) { c.Mailbox.MaxStored = max })
	full, other := f.register(t), f.register(t)
	for range max {
		f.gen.mustNotify(t, full.Listener, 1)
	}
	_, err := f.gen.notify(testContext(t), full.Listener, 1)
	wantErr(t, "notify a full registration", err, djinn.ErrResourceExhausted, "")
	if !strings.Contains(err.Error(), full.ID.String()) {
		t.Errorf("error %q does not name the registration %s", err, full.ID)
	}
	if r := f.read(t, full); r.Stored != max {
		t.Errorf("full registration holds %d events, want %d", r.Stored, max)
	}
	f.gen.mustNotify(t, other.Listener, 1)

	var first client.StoredEvent
	for se, err := range full.Pull(testContext(t), 0) {
		if err != nil {
			t.Fatal(err)
		}
		first = se
		break
	}
	if err := full.Ack(testContext(t), first.Index); err != nil {
		t.Fatal(err)
	}
	f.gen.mustNotify(t, full.Listener, 1)
}

// TestMailboxMaxRegistrations: EM.3 — registrations past
// Config.Mailbox.MaxRegistrations are refused with LeaseDenied (the service
// is unable to grant them); an ended one makes room.
func TestMailboxMaxRegistrations(t *testing.T) {
	t.Parallel()
	f := newMailboxFixture(t, func(c *server.Config) { c.Mailbox.MaxRegistrations = 2 })
	first := f.register(t)
	f.register(t)
	_, err := f.mb.Register(testContext(t), time.Minute)
	wantErr(t, "register past the bound", err, djinn.ErrLeaseDenied, "registrations")
	if err := first.Lease.Cancel(testContext(t), f.c); err != nil {
		t.Fatal(err)
	}
	f.register(t)
}
