package server

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// FuzzSharedDeliveriesRequest: any message on a shared delivery stream,
// first or later, decodes to what it asks or to an invalid-argument
// error; never a panic, and nothing it does not name.
func FuzzSharedDeliveriesRequest(f *testing.F) {
	id := make([]byte, 16)
	id[0] = 1
	for _, m := range []*djinnpb.DeliveriesRequest{
		{MaxBatch: 16, Add: []*djinnpb.DeliveryCursor{{RegistrationId: id, AfterIndex: 3, Window: 8, AckThrough: 3}}},
		{Acks: []*djinnpb.DeliveryCursor{{RegistrationId: id, AckThrough: 9}}},
		{Remove: [][]byte{id}},
		{Add: []*djinnpb.DeliveryCursor{{RegistrationId: id[:3]}}},
		{Acks: []*djinnpb.DeliveryCursor{{RegistrationId: id, Window: 2}}},
		{RegistrationId: id},
		{AfterIndex: 1},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, true)
		f.Add(b, false)
	}
	f.Fuzz(func(t *testing.T, raw []byte, first bool) {
		var m djinnpb.DeliveriesRequest
		if proto.Unmarshal(raw, &m) != nil {
			return
		}
		req, err := sharedRequest(&m, first)
		if err != nil {
			if djinn.KindOf(err) != djinn.InvalidArgument {
				t.Fatalf("%v: %v, want an invalid argument", &m, err)
			}
			return
		}
		if len(req.Add) != len(m.GetAdd()) || len(req.Acks) != len(m.GetAcks()) || len(req.Remove) != len(m.GetRemove()) {
			t.Fatalf("%v: decoded %d adds, %d acks, %d removals", &m, len(req.Add), len(req.Acks), len(req.Remove))
		}
		for i, a := range req.Add {
			c := m.GetAdd()[i]
			if string(a.ID[:]) != string(c.GetRegistrationId()) || a.After != c.GetAfterIndex() || a.Window != int(c.GetWindow()) || a.Ack != c.GetAckThrough() {
				t.Fatalf("add[%d] %v decoded as %+v", i, c, a)
			}
		}
		for i, a := range req.Acks {
			if c := m.GetAcks()[i]; string(a.ID[:]) != string(c.GetRegistrationId()) || a.Through != c.GetAckThrough() {
				t.Fatalf("acks[%d] %v decoded as %+v", i, c, a)
			}
		}
	})
}
