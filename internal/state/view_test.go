package state_test

import (
	"bytes"
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/mailbox"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// drawCommand draws a lease, mailbox or renewal command over a few
// registrations, renewal sets and client leases (numbered 1..8): enough
// to create, change and end them while a view is held.
func drawCommand(t *rapid.T) *statepb.Command {
	n := byte(rapid.IntRange(1, 8).Draw(t, "reg"))
	reg, listener, cookie := fid(n), fid(n+100), fid(n+200)
	exp := fixtureExp + int64(rapid.IntRange(0, 3).Draw(t, "exp"))
	ev := &djinnpb.RemoteEvent{Source: fref(1 + byte(rapid.IntRange(0, 1).Draw(t, "source"))), EventId: 7, Sequence: int64(rapid.IntRange(0, 99).Draw(t, "seq"))}
	set, ll := fid(n+50), fref(60+byte(rapid.IntRange(0, 1).Draw(t, "landlord")))
	key := append(append(slices.Clone(ll.ServiceId), ll.ObjectId...), cookie...)
	switch rapid.IntRange(0, 14).Draw(t, "op") {
	case 10:
		return &statepb.Command{Op: &statepb.Command_RenewalCreate{RenewalCreate: &statepb.RenewalCreate{SetId: set, Cookie: fid(n + 150), ExpiresUnixNanos: exp, HorizonUnixNanos: exp}}}
	case 11, 12:
		return &statepb.Command{NowUnixNanos: fixtureNow, Op: &statepb.Command_RenewalAdd{RenewalAdd: &statepb.RenewalAdd{SetId: fid(byte(rapid.IntRange(1, 8).Draw(t, "set")) + 50),
			Landlord: ll, Cookie: cookie, ExpiresUnixNanos: exp, DesiredUnixNanos: exp, RenewNanos: int64(time.Minute)}}}
	case 13:
		return &statepb.Command{Op: &statepb.Command_RenewalRemove{RenewalRemove: &statepb.RenewalRemove{SetId: set, Key: key}}}
	case 14:
		return &statepb.Command{NowUnixNanos: fixtureNow, Op: &statepb.Command_RenewalRenewed{RenewalRenewed: &statepb.RenewalRenewed{Keys: key, ExpiresUnixNanos: []int64{exp + 7}}}}
	case 0, 1:
		return &statepb.Command{Op: &statepb.Command_MailboxRegister{MailboxRegister: &statepb.MailboxRegister{
			RegistrationId: reg, ListenerId: listener, Cookie: cookie, ExpiresUnixNanos: exp, HorizonUnixNanos: exp + 1}}}
	case 2, 3:
		return &statepb.Command{Op: &statepb.Command_MailboxStore{MailboxStore: &statepb.MailboxStore{ListenerId: listener, Events: []*djinnpb.RemoteEvent{ev, ev}}}}
	case 4:
		return &statepb.Command{Op: &statepb.Command_MailboxDelivered{MailboxDelivered: &statepb.MailboxDelivered{
			Entries: []*statepb.Delivered{{RegistrationId: reg, ThroughIndex: uint64(rapid.IntRange(0, 6).Draw(t, "through"))}}}}}
	case 5:
		return &statepb.Command{Op: &statepb.Command_MailboxUnknown{MailboxUnknown: &statepb.MailboxUnknown{RegistrationId: reg, Keys: []*djinnpb.EventKey{{Source: ev.Source, EventId: 7}}}}}
	case 6:
		return &statepb.Command{Op: &statepb.Command_MailboxEnable{MailboxEnable: &statepb.MailboxEnable{RegistrationId: reg, Target: fref(50)}}}
	case 7:
		return &statepb.Command{Op: &statepb.Command_MailboxPull{MailboxPull: &statepb.MailboxPull{RegistrationId: reg}}}
	case 8:
		return &statepb.Command{Op: &statepb.Command_LeaseHorizon{LeaseHorizon: &statepb.LeaseHorizon{Entries: []*statepb.HorizonEntry{{Cookie: cookie, HorizonUnixNanos: exp + 9}}}}}
	default:
		return &statepb.Command{Op: &statepb.Command_LeaseCancel{LeaseCancel: &statepb.LeaseCancel{Cookies: [][]byte{cookie}}}}
	}
}

// TestViewIsTheStateWhenTaken: a snapshot taken as a view and written
// after more commands were applied — registrations made, events stored,
// forgotten and dropped, targets set, leases ended — writes the state as
// it was when the view was taken, and the state goes on unharmed.
func TestViewIsTheStateWhenTaken(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newFixtureWorld()
		l := statetest.Over(w.m)
		apply := func(label string) {
			for range rapid.IntRange(0, 40).Draw(t, label) {
				_, _ = l.Propose(context.Background(), drawCommand(t))
			}
		}
		apply("before")
		want := canonicalRecords(t, writeNow(t, w.m))
		write, release, err := w.m.View()
		if err != nil {
			t.Fatal(err)
		}
		apply("while held")
		var got bytes.Buffer
		if err := write(&got); err != nil {
			t.Fatal(err)
		}
		release()
		if !slices.Equal(canonicalRecords(t, got.Bytes()), want) {
			t.Fatal("the view wrote a state other than the one it was taken of")
		}
		// What the machine holds now is what it applied: restored from its
		// own snapshot, it writes the same.
		now := writeNow(t, w.m)
		again := newFixtureWorld()
		if err := again.m.Restore(bytes.NewReader(now)); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(canonicalRecords(t, writeNow(t, again.m)), canonicalRecords(t, now)) {
			t.Fatal("after the view, the state does not survive a snapshot")
		}
	})
}

// writeNow writes a snapshot of m at once.
func writeNow(t rapid.TB, m *state.Machine) []byte {
	write, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestSnapshotWrittenTwice: the function Snapshot returns writes once;
// its view is let go after, and a second write says so rather than
// reading a state that has moved on.
func TestSnapshotWrittenTwice(t *testing.T) {
	ls := statetest.For(newMailboxState)
	register(t, ls.Log, time.Now().Add(time.Hour))
	write, err := ls.M.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := write(&b); err != nil {
		t.Fatal(err)
	}
	if err := write(&b); err == nil {
		t.Fatal("a snapshot was written after its view was let go")
	}
}

// liveHeap returns the bytes live on the heap.
func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMemoryPerRegistration: a mailbox registration and its lease take
// under 150 bytes of heap, indexes and expiry heap included (the issue's
// target is 150 MB of live heap for a million in a whole server).
func TestMemoryPerRegistration(t *testing.T) {
	const n = 200_000
	m := state.New()
	mb := statetest.Add(m, mailbox.NewState(m.Leases, mailbox.DefaultMaxStored, m.ServiceID))
	cmd := &statepb.MailboxRegister{ExpiresUnixNanos: fixtureExp, HorizonUnixNanos: fixtureExp}
	c := &statepb.Command{Op: &statepb.Command_MailboxRegister{MailboxRegister: cmd}}
	before := liveHeap()
	for i := range n {
		reg, listener, cookie := djinn.NewID(), djinn.NewID(), djinn.NewID()
		cmd.RegistrationId, cmd.ListenerId, cmd.Cookie = reg[:], listener[:], cookie[:]
		if err, ok := m.Apply(uint64(i+1), c).(error); ok {
			t.Fatal(err)
		}
	}
	per := float64(liveHeap()-before) / n
	runtime.KeepAlive(mb)
	t.Logf("%.1f bytes per registration", per)
	if per > 150 {
		t.Fatalf("a registration takes %.1f bytes of heap, want at most 150", per)
	}
}

// TestViewWrittenWhileApplying: a view is written by another goroutine
// while commands are applied and the leader renews and expires leases —
// what Raft does — and writes the state it was taken of (run it with
// -race: the view is read without the state's locks).
func TestViewWrittenWhileApplying(t *testing.T) {
	w := newFixtureWorld()
	l := statetest.Over(w.m)
	now := time.Unix(0, fixtureNow)
	var cookies []djinn.ID
	for i := range 3000 {
		reg, listener, cookie := djinn.NewID(), djinn.NewID(), djinn.NewID()
		cookies = append(cookies, cookie)
		exp := now.Add(time.Duration(i) * time.Millisecond).UnixNano()
		if _, err := l.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_MailboxRegister{MailboxRegister: &statepb.MailboxRegister{
			RegistrationId: reg[:], ListenerId: listener[:], Cookie: cookie[:], ExpiresUnixNanos: exp, HorizonUnixNanos: exp}}}); err != nil {
			t.Fatal(err)
		}
	}
	w.m.Leases.Promote(now, 0)
	want := canonicalRecords(t, writeNow(t, w.m))
	write, release, err := w.m.View()
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	written := make(chan error)
	go func() { written <- write(&got) }()
	for i, c := range cookies[:1000] {
		switch i % 3 {
		case 0:
			_, _ = l.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_LeaseCancel{LeaseCancel: &statepb.LeaseCancel{Cookies: [][]byte{c[:]}}}})
		case 1:
			w.m.Leases.Renew(now, time.Second, "", []djinn.ID{c}, []time.Duration{time.Hour})
		default:
			w.m.Leases.PopExpired(now.Add(time.Duration(i)*time.Millisecond), 10)
		}
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	release()
	if !slices.Equal(canonicalRecords(t, got.Bytes()), want) {
		t.Fatal("the view, written while commands applied, wrote another state than the one it was taken of")
	}
}
