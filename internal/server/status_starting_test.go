package server_test

import (
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestStatusStarting: a server whose cluster has no service id yet (not
// bootstrapped, waiting to be added) still names every service it runs,
// with a zero service id, and says it is not ready: an absent reference
// means a service the node does not run, which a client reports as
// unsupported, while a zero one is a service not ready yet.
func TestStatusStarting(t *testing.T) {
	s := servertest.OpenWaiting(t, servertest.Start(t, servertest.Config(t))) // no service id until a member adds it
	st, err := servertest.Status(djinnpb.NewAdminClient(servertest.Conn(t, s.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	if st.GetReady() {
		t.Errorf("a server with no service id says it is ready")
	}
	for what, r := range map[string]*djinnpb.Ref{"landlord": st.GetLandlord(), "mailbox": st.GetMailbox(), "renewal": st.GetRenewal(),
		"txn": st.GetTxn(), "lock": st.GetLock(), "lookup": st.GetLookup(), "lds": st.GetLds()} {
		if r == nil {
			t.Errorf("%s: no reference, which says the node does not run it", what)
			continue
		}
		if id, err := djinn.IDFromBytes(what, r.GetServiceId()); err != nil || !id.IsZero() {
			t.Errorf("%s: service id %x (%v), want zero while the cluster has none", what, r.GetServiceId(), err)
		}
	}
}
