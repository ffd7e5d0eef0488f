package state_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lds"
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

// updateFixture rewrites testdata/snapshot-v1.bin from the code under
// test. It was written by the code before snapshots were streamed from
// views; rewrite it only for a deliberate change of the format.
var updateFixture = flag.Bool("update-fixture", false, "rewrite testdata/snapshot-v1.bin")

const fixturePath = "testdata/snapshot-v1.bin"

// fixtureWorld is a machine holding every service's state, with the
// mailbox's at hand.
type fixtureWorld struct {
	m       *state.Machine
	mailbox *mailbox.State
}

func newFixtureWorld() fixtureWorld {
	m := state.New()
	w := fixtureWorld{m: m, mailbox: statetest.Add(m, mailbox.NewState(m.Leases, mailbox.DefaultMaxStored, m.ServiceID))}
	statetest.Add(m, renewal.NewState(m.Leases, m.ServiceID))
	statetest.Add(m, txn.NewState(m.Leases))
	statetest.Add(m, lock.NewState(m.Leases, m.Rules))
	statetest.Add(m, lookup.NewState(m.Leases, m.ServiceID, service.Limits{}))
	statetest.Add(m, lds.NewState(m.Leases))
	return w
}

// fid is the fixture's id number n: ids are fixed so the fixture can be
// checked field by field.
func fid(n byte) []byte { return bytes.Repeat([]byte{n}, 16) }

func fref(n byte) *djinnpb.Ref {
	return &djinnpb.Ref{Endpoint: "127.0.0.1:9", ServiceId: fid(n), ObjectId: fid(n + 1)}
}

var (
	fixtureNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	fixtureExp = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
)

// fixtureCommands make state in every part: three mailbox registrations
// (one with stored events, some delivered, and a target; one with an
// unknown event; one pulled), a renewal set with a client lease and a
// listener, a transaction with a participant, a lock set with a holder,
// a lookup item and watch, a lookup discovery registration, quotas and
// a member.
func fixtureCommands() []*statepb.Command {
	ev := func(seq int64) *djinnpb.RemoteEvent {
		return &djinnpb.RemoteEvent{Source: fref(90), EventId: 7, Sequence: seq, Handback: []byte("hb")}
	}
	reg := func(n byte, p string) *statepb.Command {
		return &statepb.Command{Op: &statepb.Command_MailboxRegister{MailboxRegister: &statepb.MailboxRegister{
			RegistrationId: fid(n), ListenerId: fid(n + 1), Cookie: fid(n + 2), ExpiresUnixNanos: fixtureExp, HorizonUnixNanos: fixtureExp + 1, Principal: p}}}
	}
	ops := []*statepb.Command{
		{Op: &statepb.Command_Init{Init: &statepb.Init{ServiceId: fid(1)}}},
		{Op: &statepb.Command_Member{Member: &statepb.Member{NodeId: "n1", GrpcAddress: "127.0.0.1:4161", Voter: true}}},
		{Op: &statepb.Command_Quotas{Quotas: &statepb.Quotas{Quotas: []*statepb.Quota{{Name: "leases", PerPrincipal: 1000, Total: 100000}}}}},
		reg(10, "cn:alice"), reg(20, ""), reg(30, "cn:bob"),
		{Op: &statepb.Command_MailboxStore{MailboxStore: &statepb.MailboxStore{ListenerId: fid(11), Events: []*djinnpb.RemoteEvent{ev(1), ev(2), ev(3)}}}},
		{Op: &statepb.Command_MailboxDelivered{MailboxDelivered: &statepb.MailboxDelivered{Entries: []*statepb.Delivered{{RegistrationId: fid(10), ThroughIndex: 1}}}}},
		{Op: &statepb.Command_MailboxEnable{MailboxEnable: &statepb.MailboxEnable{RegistrationId: fid(10), Target: fref(40)}}},
		{Op: &statepb.Command_MailboxStore{MailboxStore: &statepb.MailboxStore{ListenerId: fid(21), Events: []*djinnpb.RemoteEvent{ev(4)}}}},
		{Op: &statepb.Command_MailboxUnknown{MailboxUnknown: &statepb.MailboxUnknown{RegistrationId: fid(20), Keys: []*djinnpb.EventKey{{Source: fref(91), EventId: 8}}}}},
		{Op: &statepb.Command_MailboxPull{MailboxPull: &statepb.MailboxPull{RegistrationId: fid(30)}}},
		{Op: &statepb.Command_LeaseHorizon{LeaseHorizon: &statepb.LeaseHorizon{Entries: []*statepb.HorizonEntry{{Cookie: fid(12), HorizonUnixNanos: fixtureExp + 5}}}}},
		{Op: &statepb.Command_RenewalCreate{RenewalCreate: &statepb.RenewalCreate{SetId: fid(50), Cookie: fid(51), ExpiresUnixNanos: fixtureExp, HorizonUnixNanos: fixtureExp, Principal: "cn:carol"}}},
		{NowUnixNanos: fixtureNow, Op: &statepb.Command_RenewalAdd{RenewalAdd: &statepb.RenewalAdd{SetId: fid(50), Landlord: fref(52),
			Cookie: fid(54), ExpiresUnixNanos: fixtureExp, DesiredUnixNanos: fixtureExp, RenewNanos: int64(time.Minute)}}},
		{Op: &statepb.Command_RenewalListen{RenewalListen: &statepb.RenewalListen{SetId: fid(50), EventId: 1, Target: fref(55), Handback: []byte("h")}}},
		{Op: &statepb.Command_TxnCreate{TxnCreate: &statepb.TxnCreate{Cookie: fid(60), ExpiresUnixNanos: fixtureExp, HorizonUnixNanos: fixtureExp}}},
		{Op: &statepb.Command_TxnJoin{TxnJoin: &statepb.TxnJoin{Id: 1, Participant: fref(61), CrashCount: 3}}},
		{Op: &statepb.Command_LockCreateSet{LockCreateSet: &statepb.LockCreateSet{SetId: fid(70), Cookie: fid(71), ExpiresUnixNanos: fixtureExp, HorizonUnixNanos: fixtureExp}}},
		{Op: &statepb.Command_LockCreateOwner{LockCreateOwner: &statepb.LockCreateOwner{Cookie: fid(72), ExpiresUnixNanos: fixtureExp, HorizonUnixNanos: fixtureExp}}},
		{Op: &statepb.Command_LockAcquire{LockAcquire: &statepb.LockAcquire{SetId: fid(70), Holder: &statepb.LockHolderState{Owner: fid(72)}, Mode: 5, RequestId: 1}}},
		{Op: &statepb.Command_LookupRegister{LookupRegister: &statepb.LookupRegister{Item: &djinnpb.ServiceItem{ServiceId: fid(80), Service: []byte("svc"), Types: []string{"T"},
			Entries: []*djinnpb.Entry{{Type: "E", Fields: []*djinnpb.Field{{Name: "f", Value: &djinnpb.Value{Kind: &djinnpb.Value_IntValue{IntValue: 3}}}}}}}, Cookie: fid(81), ExpiresUnixNanos: fixtureExp, HorizonUnixNanos: fixtureExp}}},
		{Op: &statepb.Command_LookupNotify{LookupNotify: &statepb.LookupNotify{Template: &djinnpb.ServiceTemplate{Types: []string{"T"}}, Transitions: 7,
			Listener: fref(82), Cookie: fid(84), ExpiresUnixNanos: fixtureExp, HorizonUnixNanos: fixtureExp}}},
		{Op: &statepb.Command_LdsRegister{LdsRegister: &statepb.LDSRegister{Groups: []string{"g"}, Listener: fref(85), Cookie: fid(87), ExpiresUnixNanos: fixtureExp, HorizonUnixNanos: fixtureExp}}},
	}
	return ops
}

func fixtureSnapshot(t *testing.T) []byte {
	t.Helper()
	w := newFixtureWorld()
	l := statetest.Over(w.m)
	for i, c := range fixtureCommands() {
		res, err := l.Propose(context.Background(), c)
		if err == nil {
			err, _ = res.(error)
		}
		if err != nil {
			t.Fatalf("fixture command %d (%T): %v", i, c.GetOp(), err)
		}
	}
	return snapshot(t, w.m)
}

// TestSnapshotFixture: a snapshot written by the code before snapshots
// were streamed from views restores, every record of every part, and the
// registrations and leases in it are served as they were.
func TestSnapshotFixture(t *testing.T) {
	if *updateFixture {
		if err := os.WriteFile(fixturePath, fixtureSnapshot(t), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, err := os.ReadFile(fixturePath)
	if err != nil {
		t.Fatal(err)
	}
	w := newFixtureWorld()
	if err := w.m.Restore(bytes.NewReader(old)); err != nil {
		t.Fatalf("the fixture does not restore: %v", err)
	}
	// Written again, it holds the same records, in any order: nothing of
	// it was lost or changed.
	want := canonicalRecords(t, old)
	if got := canonicalRecords(t, snapshot(t, w.m)); !slices.Equal(got, want) {
		t.Fatalf("the restored fixture writes %d records differing from its own %d", len(got), len(want))
	}
	checkFixtureMailbox(t, w)
	if got := w.m.Rules(); got != 1 {
		t.Errorf("rules version of a snapshot from before rules versions = %d, want 1", got)
	}
}

func checkFixtureMailbox(t *testing.T, w fixtureWorld) {
	t.Helper()
	in, err := w.mailbox.Get(djinn.ID(fid(10)))
	if err != nil {
		t.Fatal(err)
	}
	if in.Listener != djinn.ID(fid(11)) || in.Cookie != djinn.ID(fid(12)) || in.Principal != "cn:alice" || in.Stored != 2 || !proto.Equal(in.Target, fref(40)) {
		t.Fatalf("registration 10 restored as %+v", in)
	}
	if in, err := w.mailbox.ByListener(djinn.ID(fid(21))); err != nil || in.ID != djinn.ID(fid(20)) || len(in.Unknown) != 1 || in.Stored != 1 {
		t.Fatalf("registration 20 restored as %+v, %v", in, err)
	}
	li, ok := w.m.Leases.Lookup(djinn.ID(fid(12)), time.Unix(0, fixtureNow))
	if !ok || li.Expires.UnixNano() != fixtureExp || li.Horizon.UnixNano() != fixtureExp+5 || li.Owner.ID != djinn.ID(fid(10)) {
		t.Fatalf("registration 10's lease restored as %+v, %v", li, ok)
	}
	if p, _ := w.m.Leases.Principal(djinn.ID(fid(32))); p != "cn:bob" {
		t.Fatalf("registration 30's lease restored with principal %q", p)
	}
}

// canonicalRecords returns a snapshot's records, each marshalled
// deterministically, sorted.
func canonicalRecords(t interface {
	Helper()
	Fatal(...any)
}, snap []byte) []string {
	t.Helper()
	var out []string
	r := bufio.NewReader(bytes.NewReader(snap))
	for {
		var rec statepb.Record
		if err := protodelim.UnmarshalFrom(r, &rec); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		// The rules version absent (a snapshot from before rules
		// versions) is version 1.
		if in := rec.GetInit(); in != nil && in.GetRulesVersion() == 0 {
			in.RulesVersion = 1
		}
		// A registration's unknown events come from a map: in any order.
		if mb := rec.GetMailbox(); mb != nil {
			slices.SortFunc(mb.Unknown, func(a, b *djinnpb.EventKey) int {
				x, _ := proto.MarshalOptions{Deterministic: true}.Marshal(a)
				y, _ := proto.MarshalOptions{Deterministic: true}.Marshal(b)
				return bytes.Compare(x, y)
			})
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&rec)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}

// FuzzRestore: any bytes given to Restore are restored or refused with an
// error, never a panic; what restores is written again and restores the
// same.
func FuzzRestore(f *testing.F) {
	if old, err := os.ReadFile(fixturePath); err == nil {
		f.Add(old)
	}
	f.Fuzz(func(t *testing.T, snap []byte) {
		w := newFixtureWorld()
		if err := w.m.Restore(bytes.NewReader(snap)); err != nil {
			return
		}
		again := snapshot(t, w.m)
		w2 := newFixtureWorld()
		if err := w2.m.Restore(bytes.NewReader(again)); err != nil {
			t.Fatalf("a restored state's snapshot does not restore: %v", err)
		}
		if !slices.Equal(canonicalRecords(t, snapshot(t, w2.m)), canonicalRecords(t, again)) {
			t.Fatal("a restored state's snapshot restores to another state")
		}
	})
}
