package state_test

import (
	"bytes"
	"errors"
	"io"
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

func stream(t *testing.T, recs ...*statepb.Record) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, r := range recs {
		if _, err := protodelim.MarshalTo(&b, r); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func records(t *testing.T, b []byte) []*statepb.Record {
	t.Helper()
	var out []*statepb.Record
	r := bytes.NewReader(b)
	for {
		var rec statepb.Record
		if err := protodelim.UnmarshalFrom(r, &rec); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		out = append(out, &rec)
	}
}

// TestReseed: a snapshot reseeded for a restore gets a new identity (the
// saved one and its previous ones become previous), loses its member
// records, and moves on by delta the times of its own leases and of the
// renewal service's record of them; foreign leases, desired expirations,
// Forever and every other record stay as they are.
func TestReseed(t *testing.T) {
	saved, older, foreign, fresh := djinn.NewID(), djinn.NewID(), djinn.NewID(), djinn.NewID()
	const delta = time.Hour
	at := int64(1_700_000_000_000_000_000)
	own := &statepb.RenewalLeaseRecord{Landlord: &djinnpb.Ref{ServiceId: older[:]}, ExpiresUnixNanos: at, DesiredUnixNanos: at + 5, RenewedUnixNanos: at - 5}
	other := &statepb.RenewalLeaseRecord{Landlord: &djinnpb.Ref{ServiceId: foreign[:]}, ExpiresUnixNanos: at, RenewedUnixNanos: at - 5}
	txn := &statepb.Record{Record: &statepb.Record_TxnCounter{TxnCounter: &statepb.TxnCounter{NextId: 9}}}
	in := stream(t,
		&statepb.Record{Record: &statepb.Record_Init{Init: &statepb.Init{ServiceId: saved[:], PreviousIds: [][]byte{older[:]}}}},
		&statepb.Record{Record: &statepb.Record_Member{Member: &statepb.Member{NodeId: "n1", GrpcAddress: "127.0.0.1:1"}}},
		&statepb.Record{Record: &statepb.Record_Lease{Lease: &statepb.LeaseRecord{ExpiresUnixNanos: at, HorizonUnixNanos: at + 1}}},
		&statepb.Record{Record: &statepb.Record_Lease{Lease: &statepb.LeaseRecord{ExpiresUnixNanos: math.MaxInt64, HorizonUnixNanos: math.MaxInt64}}},
		&statepb.Record{Record: &statepb.Record_RenewalSet{RenewalSet: &statepb.RenewalSetRecord{WarnedExpiresUnixNanos: at, Leases: []*statepb.RenewalLeaseRecord{own, other}}}},
		txn,
	)
	var out bytes.Buffer
	if err := state.Reseed(bytes.NewReader(in), &out, fresh, delta); err != nil {
		t.Fatal(err)
	}
	got := records(t, out.Bytes())
	if len(got) != 5 {
		t.Fatalf("%d records, want 5 (the member record dropped)", len(got))
	}
	id0 := got[0].GetInit()
	if !bytes.Equal(id0.GetServiceId(), fresh[:]) || len(id0.GetPreviousIds()) != 2 ||
		!bytes.Equal(id0.GetPreviousIds()[0], saved[:]) || !bytes.Equal(id0.GetPreviousIds()[1], older[:]) {
		t.Errorf("identity %v, want %s with previous %s, %s", id0, fresh, saved, older)
	}
	d := int64(delta)
	if l := got[1].GetLease(); l.GetExpiresUnixNanos() != at+d || l.GetHorizonUnixNanos() != at+1+d {
		t.Errorf("lease %v: want its times moved on by %v", l, delta)
	}
	if l := got[2].GetLease(); l.GetExpiresUnixNanos() != math.MaxInt64 || l.GetHorizonUnixNanos() != math.MaxInt64 {
		t.Errorf("forever lease %v: want it forever still", l)
	}
	set := got[3].GetRenewalSet()
	o, f := set.GetLeases()[0], set.GetLeases()[1]
	if set.GetWarnedExpiresUnixNanos() != at+d || o.GetExpiresUnixNanos() != at+d || o.GetRenewedUnixNanos() != at-5+d || o.GetDesiredUnixNanos() != at+5 {
		t.Errorf("renewal set %v: want the set's and its own lease's times moved on, the desired expiration kept", set)
	}
	if f.GetExpiresUnixNanos() != at || f.GetRenewedUnixNanos() != at-5 {
		t.Errorf("foreign lease %v: want it as it was", f)
	}
	if !proto.Equal(got[4], txn) {
		t.Errorf("other record %v, want %v", got[4], txn)
	}
}

func TestReseedRefuses(t *testing.T) {
	id := djinn.NewID()
	uninit := stream(t, &statepb.Record{Record: &statepb.Record_TxnCounter{TxnCounter: &statepb.TxnCounter{NextId: 1}}})
	twice := stream(t,
		&statepb.Record{Record: &statepb.Record_Init{Init: &statepb.Init{ServiceId: id[:]}}},
		&statepb.Record{Record: &statepb.Record_Init{Init: &statepb.Init{ServiceId: id[:]}}})
	for name, in := range map[string][]byte{"never initialised": uninit, "two identities": twice, "not records": []byte{0xff, 0xff, 0xff}} {
		if err := state.Reseed(bytes.NewReader(in), io.Discard, djinn.NewID(), time.Second); err == nil {
			t.Errorf("%s: reseeded", name)
		}
	}
	if err := state.Reseed(bytes.NewReader(twice), io.Discard, djinn.ID{}, time.Second); err == nil {
		t.Error("reseeded with a zero service id")
	}
}
