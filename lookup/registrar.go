package lookup

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/backoff"
)

// DiscoveryManagement is what the managers of this package need of
// discovery (Jini's DiscoveryManagement): the registrars found and lost,
// and a way to drop one that proved not to be what discovery said.
// *discovery.LookupDiscoveryManager, *discovery.LookupDiscovery and
// *discovery.LookupLocatorDiscovery are all DiscoveryManagement when made
// without a Listener function.
//
// Events is read by one manager only: a discovery utility's channel hands
// each event to one reader, so a JoinManager and a ServiceDiscoveryManager
// each need a discovery utility of their own. The channel may be closed
// when discovery stops; the manager then keeps what it has. Discard must
// be safe to call from any goroutine and must not block on the channel's
// reader; the registrar it names is then reported Discarded.
type DiscoveryManagement interface {
	Events() <-chan discovery.Event
	Discard(id djinn.ID)
}

var (
	_ DiscoveryManagement = (*discovery.LookupDiscoveryManager)(nil)
	_ DiscoveryManagement = (*discovery.LookupDiscovery)(nil)
	_ DiscoveryManagement = (*discovery.LookupLocatorDiscovery)(nil)
)

// checkDiscovery refuses a missing discovery source or one configured to
// report to a listener function instead of its channel.
func checkDiscovery(what string, dm DiscoveryManagement) (<-chan discovery.Event, error) {
	if dm == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "%s: discovery management: missing", what)
	}
	events := dm.Events()
	if events == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "%s: discovery management has no event channel (it reports to a listener function)", what)
	}
	return events, nil
}

// Defaults of the managers' configurations.
const (
	DefaultRetryMin   = 100 * time.Millisecond
	DefaultRetryMax   = 30 * time.Second
	DefaultListenAddr = "127.0.0.1:0"
)

// callTimeout bounds each call a manager makes on its own behalf (not on a
// caller's context) to a lookup service: a peer that accepts a call and
// never answers costs a retry, not a stuck goroutine.
const callTimeout = 30 * time.Second

// cancelTimeout bounds the lease cancellations of Terminate.
const cancelTimeout = 5 * time.Second

// settings fills in the defaults of what both managers' configurations
// have — the lease duration (djinn.Any) and the retry bounds — and checks
// them.
func settings(what string, lease, lo, hi time.Duration) (time.Duration, time.Duration, time.Duration, error) {
	if lease == 0 {
		lease = djinn.Any
	}
	if err := djinn.CheckLeaseDuration(what+": lease duration", lease); err != nil {
		return 0, 0, 0, err
	}
	if lo == 0 {
		lo = DefaultRetryMin
	}
	if hi == 0 {
		hi = max(DefaultRetryMax, lo)
	}
	if lo < 0 || hi < lo {
		return 0, 0, 0, djinn.Errorf(djinn.InvalidArgument, "%s: retry bounds %s to %s: want 0 < min <= max", what, lo, hi)
	}
	return lease, lo, hi, nil
}

// errNotThatRegistrar marks a failure that retrying cannot mend: the
// endpoint discovery gave serves no lookup service, or another one.
var errNotThatRegistrar = errors.New("not the registrar discovery reported")

// dialRegistrar connects to the lookup service info describes, retrying
// with b while it cannot be reached. It fails only when ctx ends (with
// ctx's error) or when the endpoint proves to serve no lookup service or
// one with another service id (an error matching errNotThatRegistrar):
// discovery was wrong, and the caller should discard the registrar.
func dialRegistrar(ctx context.Context, info discovery.RegistrarInfo, opts []client.Option, b *backoff.Backoff, log *slog.Logger) (*client.Client, *client.Registrar, error) {
	for {
		c, r, err := dialOnce(ctx, info, opts)
		if err == nil || errors.Is(err, errNotThatRegistrar) {
			return c, r, err
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		log.Warn("cannot reach the lookup service; retrying", "registrar", info.ServiceID, "endpoint", info.Endpoint, "err", err)
		if !b.Wait(ctx) {
			return nil, nil, ctx.Err()
		}
	}
}

func dialOnce(ctx context.Context, info discovery.RegistrarInfo, opts []client.Option) (*client.Client, *client.Registrar, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c, err := client.Dial(ctx, info.Endpoint, opts...)
	if err != nil {
		return nil, nil, err
	}
	r, err := c.Lookup(ctx)
	switch {
	case errors.Is(err, djinn.ErrUnsupported):
		c.Close()
		return nil, nil, errors.Join(errNotThatRegistrar, err)
	case err != nil:
		c.Close()
		return nil, nil, err
	case r.Ref().Service != info.ServiceID:
		c.Close()
		return nil, nil, errors.Join(errNotThatRegistrar, djinn.Errorf(djinn.NoSuchObject,
			"lookup service at %s has service id %s, discovery reported %s", info.Endpoint, r.Ref().Service, info.ServiceID))
	}
	return c, r, nil
}

// cancelLeases cancels leases at their landlords, at once, each within
// cancelTimeout; a lease already gone is no error. A cancel that fails in
// a way that may pass (a cluster between leaders, a connection lost) is
// tried again, with backoff, until then.
func cancelLeases(c client.Connector, leases []*client.Lease) error {
	errs := make([]error, len(leases))
	var wg sync.WaitGroup
	for i, l := range leases {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
			defer cancel()
			errs[i] = cancelLease(ctx, c, l)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func cancelLease(ctx context.Context, c client.Connector, l *client.Lease) error {
	b := backoff.New(50*time.Millisecond, time.Second)
	for {
		err := l.Cancel(ctx, c)
		switch {
		case err == nil || errors.Is(err, djinn.ErrUnknownLease) || errors.Is(err, djinn.ErrNoSuchObject):
			return nil
		case djinn.IsDefinite(err) || !b.Wait(ctx):
			return err
		}
	}
}

// lostRegistration reports whether err says a registration's lease is gone
// at its lookup service: it must be made again.
func lostRegistration(err error) bool {
	return errors.Is(err, djinn.ErrUnknownLease) || errors.Is(err, djinn.ErrNoSuchObject)
}

// followDiscovery hands each discovery event to heard until ctx ends or events
// closes: how both managers follow their discovery source.
func followDiscovery(ctx context.Context, events <-chan discovery.Event, heard func(discovery.Event)) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			heard(ev)
		}
	}
}
