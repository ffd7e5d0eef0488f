package lds_test

import (
	"slices"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lds"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// looseEndpoint is an endpoint taken before endpoints were checked
// strictly (its host has a space) and so in logs and snapshots written
// then.
const looseEndpoint = "old host:4161"

// TestLooseEndpointsFromBeforeStillLoad: the log and snapshots hold
// registrations (LD.3.1) whose listener, and lookup services whose
// endpoint, were taken before endpoints were checked strictly. Their
// entries still apply as they replay, and a snapshot holding them still
// loads: what was acknowledged is never refused. A lookup service handed
// in now with such an endpoint is refused, naming it.
func TestLooseEndpointsFromBeforeStillLoad(t *testing.T) {
	w := newWorld(t)
	cookie := djinn.NewID()
	old := &djinnpb.Ref{Endpoint: "old listener:9", ServiceId: make([]byte, 16), ObjectId: make([]byte, 16)}
	w.must(w.propose(&statepb.Command{Op: &statepb.Command_LdsRegister{LdsRegister: &statepb.LDSRegister{
		AllGroups: true, Listener: old, Cookie: cookie[:], ExpiresUnixNanos: time.Now().Add(time.Hour).UnixNano(),
	}}}))
	w.names[cookie] = "Old"
	r := reg(1, "a")
	r.Endpoint = looseEndpoint
	w.found(r)
	w.expect("Old+r1")

	w2 := restored(t, w)
	if got := w2.registrars(cookie); !slices.Equal(got, []string{"r1"}) {
		t.Fatalf("after a restore, the registration has %v, want r1", got)
	}
	known := w2.log.st.Known()
	if len(known) != 1 || known[0].Endpoint != looseEndpoint {
		t.Fatalf("after a restore, lookup services %+v, want r1 at %q", known, looseEndpoint)
	}
	w2.unwanted(false, r) // dropping it takes it as stored too
	w2.expect("Old-r1")

	_, err := lds.RegistrarFromProto(r.Proto())
	wantErr(t, err, djinn.InvalidArgument, looseEndpoint, "want a DNS name")
}
