package state_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/join"
	"github.com/djinn-go/djinn/internal/lds"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/lookup"
	"github.com/djinn-go/djinn/internal/mailbox"
	"github.com/djinn-go/djinn/internal/renewal"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
	"github.com/djinn-go/djinn/service"
)

func newMailboxState(m *state.Machine) *mailbox.State {
	return mailbox.NewState(m.Leases, mailbox.DefaultMaxStored, m.ServiceID)
}

// full is a machine holding every service's state, as a server's does.
type full struct {
	*state.Machine
	renewal *renewal.State
}

// newMachine returns a machine holding every service's state. It fails
// when a command or record has no handler: add the new service here.
func newMachine(t testing.TB) full {
	m := state.New()
	f := full{Machine: m, renewal: statetest.Add(m, renewal.NewState(m.Leases, m.ServiceID))}
	statetest.Add(m, newMailboxState(m))
	statetest.Add(m, txn.NewState(m.Leases))
	statetest.Add(m, lock.NewState(m.Leases, m.Rules))
	statetest.Add(m, lookup.NewState(m.Leases, m.ServiceID, service.Limits{}))
	statetest.Add(m, lds.NewState(m.Leases))
	statetest.Add(m, join.NewState())
	if missing := m.Unhandled(); len(missing) > 0 {
		t.Fatalf("no state part handles %v", missing)
	}
	return f
}

func register(t *testing.T, l *statetest.Log, exp time.Time) (reg, listener, cookie djinn.ID) {
	t.Helper()
	reg, listener, cookie = djinn.NewID(), djinn.NewID(), djinn.NewID()
	_, err := l.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_MailboxRegister{MailboxRegister: &statepb.MailboxRegister{
		RegistrationId: reg[:], ListenerId: listener[:], Cookie: cookie[:],
		ExpiresUnixNanos: exp.UnixNano(), HorizonUnixNanos: exp.Add(time.Second).UnixNano(),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return reg, listener, cookie
}

func store(t *testing.T, l *statetest.Log, listener djinn.ID, seq int64) {
	t.Helper()
	src := &djinnpb.Ref{Endpoint: "127.0.0.1:1", ServiceId: make([]byte, 16), ObjectId: make([]byte, 16)}
	_, err := l.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_MailboxStore{MailboxStore: &statepb.MailboxStore{
		ListenerId: listener[:], Events: []*djinnpb.RemoteEvent{{Source: src, EventId: 1, Sequence: seq}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
}

func snapshot(t *testing.T, m *state.Machine) []byte {
	t.Helper()
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

// TestSnapshotRoundTrip: a restored machine holds the same state, and
// snapshots of equal states are equal in content.
func TestSnapshotRoundTrip(t *testing.T) {
	ls := statetest.For(newMailboxState)
	l := ls.Log
	exp := time.Now().Add(time.Hour)
	reg, listener, cookie := register(t, l, exp)
	for i := int64(1); i <= 5; i++ {
		store(t, l, listener, i)
	}
	target := &djinnpb.Ref{Endpoint: "127.0.0.1:2", ServiceId: bytes.Repeat([]byte{7}, 16), ObjectId: bytes.Repeat([]byte{8}, 16)}
	if _, err := l.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_MailboxEnable{MailboxEnable: &statepb.MailboxEnable{RegistrationId: reg[:], Target: target}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_MailboxUnknown{MailboxUnknown: &statepb.MailboxUnknown{
		RegistrationId: reg[:], Keys: []*djinnpb.EventKey{{Source: target, EventId: 9}},
	}}}); err != nil {
		t.Fatal(err)
	}
	snap := snapshot(t, l.M)

	m2 := state.New()
	mb2 := statetest.Add(m2, newMailboxState(m2))
	if err := m2.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if m2.ServiceID() != l.M.ServiceID() {
		t.Fatal("service id not restored")
	}
	in, err := mb2.Get(reg)
	if err != nil {
		t.Fatal(err)
	}
	if in.Listener != listener || in.Cookie != cookie || in.Stored != 5 || !proto.Equal(in.Target, target) || len(in.Unknown) != 1 {
		t.Fatalf("restored registration %+v", in)
	}
	li, ok := m2.Leases.Lookup(cookie, time.Now())
	if !ok || !li.Expires.Equal(time.Unix(0, exp.UnixNano())) || !li.Horizon.Equal(time.Unix(0, exp.Add(time.Second).UnixNano())) {
		t.Fatalf("restored lease %+v %v", li, ok)
	}
	// The restored machine goes on applying: the next index follows.
	l2 := &statetest.Log{M: m2}
	store(t, l2, listener, 6)
	res, err := l2.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_MailboxPull{MailboxPull: &statepb.MailboxPull{RegistrationId: reg[:]}}})
	if err != nil {
		t.Fatal(err)
	}
	events, _, err := mb2.After(reg, res.(mailbox.PullBegun).Pull, 5, 10)
	if err != nil || len(events) != 1 || events[0].Index != 6 {
		t.Fatalf("after restore the next event got %v, %v", events, err)
	}
}

func TestRestoreRejectsGarbage(t *testing.T) {
	m := newMachine(t)
	for _, b := range [][]byte{{0xff, 0xff, 0xff, 0xff, 0x0f}, {5, 1, 2}} {
		if err := m.Restore(bytes.NewReader(b)); err == nil {
			t.Errorf("Restore(%x) accepted garbage", b)
		}
	}
}

func TestLeaseEndRemovesRegistration(t *testing.T) {
	ls := statetest.For(newMailboxState)
	l := ls.Log
	reg, _, cookie := register(t, l, time.Now().Add(time.Hour))
	if _, err := l.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_LeaseExpire{LeaseExpire: &statepb.LeaseExpire{Cookies: [][]byte{cookie[:]}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ls.State.Get(reg); err == nil {
		t.Fatal("registration outlived its lease")
	}
}

// FuzzApply: any command that decodes can be applied without a panic, and
// applying the same commands to two machines leaves equal snapshots
// (determinism).
func FuzzApply(f *testing.F) {
	for _, s := range applySeeds() {
		b, _ := proto.Marshal(s)
		f.Add(b, b)
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		m1, m2 := newMachine(t), newMachine(t)
		for i, raw := range [][]byte{a, b} {
			var c1, c2 statepb.Command
			if proto.Unmarshal(raw, &c1) != nil {
				continue
			}
			_ = proto.Unmarshal(raw, &c2)
			m1.Apply(uint64(i+1), &c1)
			m2.Apply(uint64(i+1), &c2)
		}
		// A rules version above the machine's stops both alike, and a
		// stopped machine takes no snapshot.
		if stop1, stop2 := m1.Refusal() != nil, m2.Refusal() != nil; stop1 || stop2 {
			if stop1 != stop2 {
				t.Fatal("of two machines applying the same commands one stopped")
			}
			return
		}
		r1, r2 := newMachine(t), newMachine(t)
		if err := r1.Restore(bytes.NewReader(snapshot(t, m1.Machine))); err != nil {
			t.Fatalf("snapshot of applied state does not restore: %v", err)
		}
		if err := r2.Restore(bytes.NewReader(snapshot(t, m2.Machine))); err != nil {
			t.Fatal(err)
		}
		s1, l1 := r1.renewal.Len()
		s2, l2 := r2.renewal.Len()
		if r1.Leases.Len() != r2.Leases.Len() || s1 != s2 || l1 != l2 {
			t.Fatal("two machines applying the same commands differ")
		}
	})
}

// TestAddRefusesClashes: a part is refused, naming what clashes, when it
// handles a command or record another part handles, handles a message
// that is no command, or takes a lease kind already taken.
func TestAddRefusesClashes(t *testing.T) {
	noop := func(int64, *statepb.MailboxStore) any { return nil }
	for _, tt := range []struct {
		name string
		part state.Part
		want string
	}{
		{"a command handled twice", state.Part{Name: "b", Commands: []state.Command{state.On(noop)}}, "MailboxStore"},
		{"a record restored twice", state.Part{Name: "b", Records: []state.Record{state.Restores(func(*statepb.MailboxRecord) error { return nil })}}, "MailboxRecord"},
		{"a message that is no command", state.Part{Name: "b", Commands: []state.Command{state.On(func(int64, *statepb.MailboxRecord) any { return nil })}}, "is no command"},
		{"a lease kind taken", state.Part{Name: "b", Leases: []state.LeaseKind{{Kind: mailbox.LeaseKind, Name: "b", Ended: func(lease.Owner) {}}}}, "taken"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := state.New()
			statetest.Add(m, newMailboxState(m))
			err := m.Add(tt.part)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Add = %v, want an error naming %q", err, tt.want)
			}
			if len(m.Unhandled()) == 0 {
				t.Fatal("a machine without most services says every command is handled")
			}
		})
	}
}

// applySeeds are FuzzApply's seeds: a command of each kind.
func applySeeds() []*statepb.Command {
	id := djinn.NewID()
	return []*statepb.Command{
		{Op: &statepb.Command_Init{Init: &statepb.Init{ServiceId: id[:]}}},
		{Op: &statepb.Command_Init{Init: &statepb.Init{ServiceId: id[:], RulesVersion: state.MaxRules()}}},
		{Op: &statepb.Command_RulesRaise{RulesRaise: &statepb.RulesRaise{Version: state.MaxRules()}}},
		{Op: &statepb.Command_RulesRaise{RulesRaise: &statepb.RulesRaise{Version: state.MaxRules() + 1}}},
		{Op: &statepb.Command_Member{Member: &statepb.Member{NodeId: "n1", GrpcAddress: "127.0.0.1:1", RulesMax: 2}}},
		{Op: &statepb.Command_MailboxRegister{MailboxRegister: &statepb.MailboxRegister{RegistrationId: id[:], ListenerId: id[:], Cookie: id[:], ExpiresUnixNanos: 5}}},
		{Op: &statepb.Command_MailboxStore{MailboxStore: &statepb.MailboxStore{ListenerId: id[:], Events: []*djinnpb.RemoteEvent{{}}}}},
		{Op: &statepb.Command_LeaseCancel{LeaseCancel: &statepb.LeaseCancel{Cookies: [][]byte{id[:], {1}}}}},
		{Op: &statepb.Command_MailboxDelivered{MailboxDelivered: &statepb.MailboxDelivered{Entries: []*statepb.Delivered{{RegistrationId: id[:], ThroughIndex: 3}}}}},
		{Op: &statepb.Command_MailboxUnknown{MailboxUnknown: &statepb.MailboxUnknown{RegistrationId: id[:], Keys: []*djinnpb.EventKey{{}}}}},
		{Op: &statepb.Command_RenewalCreate{RenewalCreate: &statepb.RenewalCreate{SetId: id[:], Cookie: id[:], ExpiresUnixNanos: 5}}},
		{NowUnixNanos: 3, Op: &statepb.Command_RenewalAdd{RenewalAdd: &statepb.RenewalAdd{SetId: id[:], Landlord: &djinnpb.Ref{ServiceId: id[:], ObjectId: id[:]},
			Cookie: id[:], ExpiresUnixNanos: 9, DesiredUnixNanos: 7, RenewNanos: 1}}},
		{Op: &statepb.Command_RenewalListen{RenewalListen: &statepb.RenewalListen{SetId: id[:], EventId: 1, Target: &djinnpb.Ref{}}}},
		{Op: &statepb.Command_RenewalRenewed{RenewalRenewed: &statepb.RenewalRenewed{Keys: append(append(id[:], id[:]...), id[:]...), ExpiresUnixNanos: []int64{4, 5}}}},
		{NowUnixNanos: 8, Op: &statepb.Command_RenewalEnd{RenewalEnd: &statepb.RenewalEnd{Entries: []*statepb.RenewalEnding{{Key: append(append(id[:], id[:]...), id[:]...), Reason: 2}}}}},
		{Op: &statepb.Command_RenewalWarn{RenewalWarn: &statepb.RenewalWarn{SetId: id[:], SetExpiresUnixNanos: 5}}},
		{Op: &statepb.Command_RenewalDelivered{RenewalDelivered: &statepb.RenewalDelivered{Entries: []*statepb.RenewalDeliveredEntry{{SetId: id[:], EventId: 1, ThroughSequence: 2}}}}},
		{Op: &statepb.Command_RenewalRemove{RenewalRemove: &statepb.RenewalRemove{SetId: id[:], Key: id[:]}}},
		{Op: &statepb.Command_TxnCreate{TxnCreate: &statepb.TxnCreate{Cookie: id[:], ExpiresUnixNanos: 5, Id: 7}}},
		{Op: &statepb.Command_TxnJoin{TxnJoin: &statepb.TxnJoin{Id: 7, Participant: &djinnpb.Ref{ServiceId: id[:], ObjectId: id[:]}, MaxParticipants: 1}}},
		{Op: &statepb.Command_LockCreateSet{LockCreateSet: &statepb.LockCreateSet{SetId: id[:], Cookie: id[:], ExpiresUnixNanos: 5}}},
		{Op: &statepb.Command_LockCreateOwner{LockCreateOwner: &statepb.LockCreateOwner{Cookie: id[:], ExpiresUnixNanos: 5}}},
		{Op: &statepb.Command_LockAcquire{LockAcquire: &statepb.LockAcquire{SetId: id[:], Holder: &statepb.LockHolderState{Owner: id[:]}, Mode: 5, RequestId: 1}}},
		{Op: &statepb.Command_LockAcquire{LockAcquire: &statepb.LockAcquire{SetId: id[:], Holder: &statepb.LockHolderState{Manager: &djinnpb.Ref{ServiceId: id[:], ObjectId: id[:]}, Txn: 3,
			AncestorIds: []uint64{2}, AncestorManagers: []*djinnpb.Ref{{ServiceId: id[:], ObjectId: id[:]}}}, Mode: 1, RequestId: 2}}},
		{Op: &statepb.Command_LockRelease{LockRelease: &statepb.LockRelease{SetId: id[:], Holder: &statepb.LockHolderState{Owner: id[:]}, Mode: 5}}},
		{Op: &statepb.Command_LockCancel{LockCancel: &statepb.LockCancel{RequestIds: []uint64{1, 2}}}},
		{Op: &statepb.Command_LockTxnEnd{LockTxnEnd: &statepb.LockTxnEnd{Manager: &djinnpb.Ref{ServiceId: id[:], ObjectId: id[:]}, Txn: 3, Commit: true}}},
		{Op: &statepb.Command_LookupRegister{LookupRegister: &statepb.LookupRegister{Item: &djinnpb.ServiceItem{ServiceId: id[:], Service: []byte("r"), Types: []string{"T"},
			Entries: []*djinnpb.Entry{{Type: "E", Fields: []*djinnpb.Field{{Name: "f", Value: &djinnpb.Value{Kind: &djinnpb.Value_IntValue{IntValue: 3}}}}}}}, Cookie: id[:], ExpiresUnixNanos: 5}}},
		{Op: &statepb.Command_LookupNotify{LookupNotify: &statepb.LookupNotify{Template: &djinnpb.ServiceTemplate{Types: []string{"T"}}, Transitions: 7,
			Listener: &djinnpb.Ref{ServiceId: id[:], ObjectId: id[:]}, Cookie: id[:], ExpiresUnixNanos: 5}}},
		{Op: &statepb.Command_LookupAttributes{LookupAttributes: &statepb.LookupAttributes{Cookie: id[:], Op: 1, Entries: []*djinnpb.Entry{{Type: "E"}}}}},
		{Op: &statepb.Command_JoinConfigure{JoinConfigure: &statepb.JoinConfigure{Service: "txn", ServiceId: id[:], Groups: []string{""}, Locators: []string{"jini://h"}}}},
		{Op: &statepb.Command_JoinGroups{JoinGroups: &statepb.JoinGroupsChange{Service: "txn", Op: djinnpb.SetOp_SET_OP_ADD, Groups: []string{"g"}}}},
		{Op: &statepb.Command_JoinLocators{JoinLocators: &statepb.JoinLocatorsChange{Service: "txn", Op: djinnpb.SetOp_SET_OP_REMOVE, Locators: []string{"jini://h"}}}},
		{Op: &statepb.Command_JoinAttributes{JoinAttributes: &statepb.JoinAttributesChange{Service: "txn", Op: 1, Entries: []*djinnpb.Entry{{Type: "E"}}}}},
	}
}

// TestApplyHandsTheOpToItsHandler: Apply gives the handler of the op's
// type the op itself and the command's time; a command with no op, an
// op wrapper holding nothing, or an op no part handles is an Internal
// error naming it, and reaches no handler.
func TestApplyHandsTheOpToItsHandler(t *testing.T) {
	m := state.New()
	var got *statepb.MailboxStore
	var at int64
	if err := m.Add(state.Part{Name: "probe", Commands: []state.Command{state.On(func(now int64, c *statepb.MailboxStore) any {
		got, at = c, now
		return "applied"
	})}}); err != nil {
		t.Fatal(err)
	}
	op := &statepb.MailboxStore{ListenerId: []byte{1}}
	if res := m.Apply(1, &statepb.Command{NowUnixNanos: 7, Op: &statepb.Command_MailboxStore{MailboxStore: op}}); res != "applied" || got != op || at != 7 {
		t.Fatalf("Apply = %v; the handler got %p at %d, want %p at 7", res, got, at, op)
	}
	got = nil
	for _, tt := range []struct {
		name string
		cmd  *statepb.Command
		want string
	}{
		{"no op", &statepb.Command{}, "<nil>"},
		{"an op wrapper that is nil", &statepb.Command{Op: (*statepb.Command_MailboxStore)(nil)}, "Command_MailboxStore"},
		{"an op no part handles", &statepb.Command{Op: &statepb.Command_LockAcquire{LockAcquire: &statepb.LockAcquire{}}}, "Command_LockAcquire"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err, _ := m.Apply(2, tt.cmd).(error)
			if djinn.KindOf(err) != djinn.Internal || !strings.Contains(fmt.Sprint(err), tt.want) {
				t.Fatalf("Apply = %v, want an Internal error naming %s", err, tt.want)
			}
			if got != nil {
				t.Fatal("a handler got a command that was not its")
			}
		})
	}
}

// TestRestoreRefusesCutShort: a snapshot that ends inside a part's
// document (its records came, but not the last one) is refused, naming
// the part, instead of restoring that part as empty.
func TestRestoreRefusesCutShort(t *testing.T) {
	m := newMachine(t)
	var b bytes.Buffer
	first := &statepb.Record{Record: &statepb.Record_Lock{Lock: &statepb.LockRecord{Table: []byte(`{"Table":{"Sets":[`)}}}
	if _, err := protodelim.MarshalTo(&b, first); err != nil {
		t.Fatal(err)
	}
	err := m.Restore(bytes.NewReader(b.Bytes()))
	if err == nil || !strings.Contains(err.Error(), "lock") || !strings.Contains(err.Error(), "cut short") {
		t.Fatalf("a snapshot cut inside the lock document: %v, want a refusal naming the lock part", err)
	}
	// The same machine then restores a whole snapshot.
	whole := snapshot(t, newMachine(t).Machine)
	if err := m.Restore(bytes.NewReader(whole)); err != nil {
		t.Fatalf("a whole snapshot after the refused one: %v", err)
	}
}

// TestServiceIDKnown: ServiceIDKnown is closed by the first Init and stays
// closed; a second Init keeps the first id.
func TestServiceIDKnown(t *testing.T) {
	m := state.New()
	select {
	case <-m.ServiceIDKnown():
		t.Fatal("known before any Init")
	default:
	}
	first, second := djinn.NewID(), djinn.NewID()
	m.Apply(1, &statepb.Command{Op: &statepb.Command_Init{Init: &statepb.Init{ServiceId: first[:]}}})
	select {
	case <-m.ServiceIDKnown():
	default:
		t.Fatal("not known after Init")
	}
	m.Apply(2, &statepb.Command{Op: &statepb.Command_Init{Init: &statepb.Init{ServiceId: second[:]}}})
	if got := m.ServiceID(); got != first {
		t.Fatalf("service id %s after a second Init, want the first, %s", got, first)
	}
}
