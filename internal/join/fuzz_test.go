package join_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn/internal/join"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
	"github.com/djinn-go/djinn/service"
)

// FuzzApply: any join command that decodes is applied or refused without
// a panic, two machines applying the same commands hold the same settings,
// and their snapshot restores to them.
func FuzzApply(f *testing.F) {
	seeds := []*statepb.Command{
		{Op: &statepb.Command_JoinConfigure{JoinConfigure: configured(id1)}},
		{Op: &statepb.Command_JoinGroups{JoinGroups: &statepb.JoinGroupsChange{Service: "txn", Op: djinnpb.SetOp_SET_OP_ADD, Groups: []string{"", "a"}}}},
		{Op: &statepb.Command_JoinLocators{JoinLocators: &statepb.JoinLocatorsChange{Service: "txn", Op: djinnpb.SetOp_SET_OP_SET, Locators: []string{"jini://h"}}}},
		{Op: &statepb.Command_JoinAttributes{JoinAttributes: &statepb.JoinAttributesChange{Service: "txn", Op: join.OpModify,
			Entries: wire.Entries([]service.Entry{name("b")}), Templates: []*djinnpb.EntryTemplate{{Type: "net.jini.lookup.entry.Name"}}}}},
	}
	for _, a := range seeds {
		for _, b := range seeds {
			ab, _ := proto.Marshal(a)
			bb, _ := proto.Marshal(b)
			f.Add(ab, bb)
		}
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		l1, l2 := statetest.For(newState), statetest.For(newState)
		for _, raw := range [][]byte{a, b} {
			var c1, c2 statepb.Command
			if proto.Unmarshal(raw, &c1) != nil {
				continue
			}
			_ = proto.Unmarshal(raw, &c2)
			_, err1 := l1.Propose(context.Background(), &c1)
			_, err2 := l2.Propose(context.Background(), &c2)
			if (err1 == nil) != (err2 == nil) {
				t.Fatalf("one machine took the command (%v), the other refused it (%v)", err1, err2)
			}
		}
		re, err := statetest.Restart(l1.Log, newState)
		if err != nil {
			t.Fatalf("the snapshot does not restore: %v", err)
		}
		r1, r2, r3 := l1.State.Records(), l2.State.Records(), re.State.Records()
		if len(r1) != len(r2) || len(r1) != len(r3) {
			t.Fatalf("records %d, %d, restored %d", len(r1), len(r2), len(r3))
		}
		for i := range r1 {
			// Compared as bytes: a NaN field value equals itself there.
			if !sameBytes(r1[i], r2[i]) || !sameBytes(r1[i], r3[i]) {
				t.Fatalf("service %d: %v, %v, restored %v", i, r1[i], r2[i], r3[i])
			}
		}
	})
}

func sameBytes(a, b proto.Message) bool {
	o := proto.MarshalOptions{Deterministic: true}
	ab, err1 := o.Marshal(a)
	bb, err2 := o.Marshal(b)
	return err1 == nil && err2 == nil && string(ab) == string(bb)
}
