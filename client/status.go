package client

import (
	"context"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Status is one answer of the server a Client is dialled to about
// itself: whether it is ready, and the references of the services it
// runs. Asked once, it answers all of them: a caller that waits for a
// server to be ready and then needs a service's reference asks once per
// try.
type Status struct {
	c  *Client
	pb *djinnpb.StatusResponse
}

// Status asks the server c is dialled to for its status.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	pb, err := djinnpb.NewAdminClient(c.cluster.cc).Status(ctx, &djinnpb.StatusRequest{})
	if err != nil {
		return nil, err
	}
	return &Status{c: c, pb: pb}, nil
}

// Proto returns the answer as it came.
func (s *Status) Proto() *djinnpb.StatusResponse { return s.pb }

// Ready says whether the server is ready, as its /readyz has it: nil when
// it is, else an error that is ErrNotReady saying what it waits for.
func (s *Status) Ready() error {
	st := s.pb
	if st.GetReady() {
		return nil
	}
	why := "its leader's services are still starting"
	switch id, err := djinn.IDFromBytes("service id", st.GetServiceId()); {
	case err != nil || id.IsZero():
		why = "its cluster has no service id yet (its first leader gives it one once elected; a server started with --bootstrap=false, once added to a cluster)"
	case st.GetLeaderId() == "" && st.GetState() != "Leader":
		why = "it knows no leader (electing, or without a quorum)"
	}
	return notReady(s.c.addr, "server at %s is still starting: %s; retry once its /readyz answers ready", s.c.addr, why)
}

// TransactionManager is the server's transaction manager, as
// Client.TransactionManager finds it.
func (s *Status) TransactionManager() (*TransactionManager, error) {
	return statusService(s, "transaction manager", s.pb.GetTxn(), NewTransactionManager)
}

// LockService is the server's lock service, as Client.LockService finds
// it.
func (s *Status) LockService() (*LockService, error) {
	return statusService(s, "lock service", s.pb.GetLock(), NewLockService)
}

// Lookup is the server's lookup service, as Client.Lookup finds it.
func (s *Status) Lookup() (*Registrar, error) {
	return statusService(s, "lookup service", s.pb.GetLookup(), NewRegistrar)
}

// LookupDiscovery is the server's lookup discovery service, as
// Client.LookupDiscovery finds it.
func (s *Status) LookupDiscovery() (*LookupDiscoveryService, error) {
	return statusService(s, "lookup discovery service", s.pb.GetLds(), NewLookupDiscoveryService)
}

// statusService makes a client for the service what that the status
// names by r: djinn.ErrUnsupported when the server does not run it,
// ErrNotReady while its cluster has no service id yet.
func statusService[T any](s *Status, what string, r *djinnpb.Ref, client func(Connector, djinn.Ref) T) (T, error) {
	var zero T
	if r == nil {
		return zero, djinn.Errorf(djinn.Unsupported, "server at %s does not run the %s (services %v)", s.c.addr, what, s.pb.GetServices())
	}
	ref, err := s.c.statusRef(what, r)
	if err != nil {
		return zero, err
	}
	return client(s.c, ref), nil
}
