package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/service"
)

// FindOption says where Find looks and what it wants. A nil FindOption is
// ignored.
type FindOption func(*findOptions)

type findOptions struct {
	groups     []string
	locators   []discovery.Locator
	entries    []service.EntryTemplate
	interfaces []string
	conn       []Option
	err        error // the first bad option
}

// InGroups makes Find discover the lookup services of groups by multicast
// ("" is the public group). Multicast reaches the local network only, and
// a djinn lookup service answers it only when its server runs with
// --multicast.
func InGroups(groups ...string) FindOption {
	return func(o *findOptions) { o.groups = append(o.groups, groups...) }
}

// AtLocators makes Find discover the lookup services at locators
// (jini://host[:port], the port 4160 by default), by unicast.
func AtLocators(locators ...string) FindOption {
	return func(o *findOptions) {
		for _, s := range locators {
			l, err := discovery.ParseLocator(s)
			if err != nil && o.err == nil {
				o.err = djinn.Errorf(djinn.InvalidArgument, "find: %v", err)
			}
			o.locators = append(o.locators, l)
		}
	}
}

// Matching makes Find want a service whose attributes the entry templates
// match, as a lookup template's do: each template some entry.
func Matching(entries ...service.EntryTemplate) FindOption {
	return func(o *findOptions) { o.entries = append(o.entries, entries...) }
}

// OnInterfaces names the network interfaces multicast discovery uses
// (default: every one up and multicast-capable).
func OnInterfaces(names ...string) FindOption {
	return func(o *findOptions) { o.interfaces = append(o.interfaces, names...) }
}

// ConnectWith gives the options of Find's connections, to the lookup
// services and to the service found (TLS, ...).
func ConnectWith(opts ...Option) FindOption {
	return func(o *findOptions) { o.conn = append(o.conn, opts...) }
}

// Found is a service Find found: its item, its reference, and a Client
// connected to it — to the cluster that serves it, which the client
// follows, so that calls reach whichever member serves. Close it when
// done. The typed accessors give its client of the service's kind.
type Found struct {
	Item   service.Item
	Ref    djinn.Ref
	Client *Client
	// Registrar is the service id of the lookup service it was found at.
	Registrar djinn.ID
}

// Close closes the found service's connections.
func (f *Found) Close() error { return f.Client.Close() }

// is refuses a found service that is not a typ.
func (f *Found) is(typ string) error {
	if !(service.Template{Types: []string{typ}}).Matches(f.Item) {
		return djinn.Errorf(djinn.InvalidArgument, "found service %s (types %v) is not a %s", f.Item.ID, f.Item.Types, typ)
	}
	return nil
}

// TransactionManager returns the found transaction manager's client.
func (f *Found) TransactionManager() (*TransactionManager, error) {
	if err := f.is(service.TransactionManagerType); err != nil {
		return nil, err
	}
	return NewTransactionManager(f.Client, f.Ref), nil
}

// Mailbox returns the found event mailbox's client.
func (f *Found) Mailbox() (*Mailbox, error) {
	if err := f.is(service.EventMailboxType); err != nil {
		return nil, err
	}
	return &Mailbox{c: f.Client, ref: djinn.Ref{Endpoint: f.Client.Addr(), Service: f.Ref.Service}}, nil
}

// RenewalService returns the found lease renewal service's client.
func (f *Found) RenewalService() (*RenewalService, error) {
	if err := f.is(service.LeaseRenewalServiceType); err != nil {
		return nil, err
	}
	return &RenewalService{c: f.Client, ref: djinn.Ref{Endpoint: f.Client.Addr(), Service: f.Ref.Service}}, nil
}

// LockService returns the found lock service's client.
func (f *Found) LockService() (*LockService, error) {
	if err := f.is(service.LockServiceType); err != nil {
		return nil, err
	}
	return NewLockService(f.Client, f.Ref), nil
}

// LookupDiscovery returns the found lookup discovery service's client.
func (f *Found) LookupDiscovery() (*LookupDiscoveryService, error) {
	if err := f.is(service.LookupDiscoveryServiceType); err != nil {
		return nil, err
	}
	return NewLookupDiscoveryService(f.Client, f.Ref), nil
}

// Find finds a service of type typ — one of package service's djinn types
// (service.TransactionManagerType, "djinn.TransactionManager"; or any type
// a lookup service's items have) — without knowing where it is, as a Jini
// client does: it discovers lookup services in the groups and at the
// locators opts give (one of the two at least), asks each as it is found
// for an item of the type (and the attributes Matching gives), and
// connects to the first it gets. Lookup services that hold none are asked
// again, with backoff, so a service that registers later is found too:
// Find returns when it has found one, or when ctx ends (give it a
// deadline). The connection follows the service's cluster: a djinn
// service's item names the cluster's members (its djinn.Cluster entry),
// and the client dials them all.
//
//	found, err := client.Find(ctx, service.TransactionManagerType, client.InGroups("prod"))
//	...
//	defer found.Close()
//	mgr, err := found.TransactionManager()
func Find(ctx context.Context, typ string, opts ...FindOption) (*Found, error) {
	var o findOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case o.err != nil:
		return nil, o.err
	case typ == "":
		return nil, djinn.Errorf(djinn.InvalidArgument, "find: no service type: name the type to find, as service.TransactionManagerType")
	case len(o.groups) == 0 && len(o.locators) == 0:
		return nil, djinn.Errorf(djinn.InvalidArgument, "find %s: nowhere to look: give the lookup services' groups (InGroups) or locators (AtLocators)", typ)
	}
	tmpl := service.Template{Types: []string{typ}, Entries: o.entries}
	if _, err := (service.Limits{}).Matcher(tmpl); err != nil {
		return nil, fmt.Errorf("find %s: %w", typ, err)
	}
	dm, err := discovery.NewLookupDiscoveryManager(discovery.LookupDiscoveryManagerConfig{
		Groups:           discovery.LookupDiscoveryConfig{Groups: o.groups, Interfaces: o.interfaces},
		DisableMulticast: len(o.groups) == 0,
		Locators:         discovery.LookupLocatorDiscoveryConfig{Locators: o.locators},
	})
	if err != nil {
		return nil, fmt.Errorf("find %s: %w", typ, err)
	}
	defer dm.Close()
	f := &finder{typ: typ, tmpl: tmpl, opts: &o, found: make(chan *Found)}
	return f.run(ctx, dm.Events())
}

// finder is one Find: a watcher per lookup service discovered, the first
// to find a service wins.
type finder struct {
	typ   string
	tmpl  service.Template
	opts  *findOptions
	found chan *Found

	mu         sync.Mutex
	registrars int   // guarded by mu: discovered
	last       error // guarded by mu: the last failure, for the error at the end
}

func (f *finder) run(ctx context.Context, events <-chan discovery.Event) (*Found, error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil // discovery stopped: wait for the watchers
				continue
			}
			if ev.Kind == discovery.Discovered {
				f.mu.Lock()
				f.registrars++
				f.mu.Unlock()
				wg.Go(func() { f.watch(ctx, ev.Registrar) })
			}
		case found := <-f.found:
			return found, nil
		case <-ctx.Done():
			return nil, f.failed(ctx)
		}
	}
}

// failed is Find's error when ctx ended first.
func (f *finder) failed(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var where []string
	if len(f.opts.groups) > 0 {
		where = append(where, fmt.Sprintf("groups %q", f.opts.groups))
	}
	for _, l := range f.opts.locators {
		where = append(where, l.String())
	}
	msg := fmt.Sprintf("find %s: none found; %d lookup services discovered (%s)", f.typ, f.registrars, strings.Join(where, ", "))
	if f.registrars == 0 && len(f.opts.groups) > 0 {
		msg += "; a lookup service answers multicast only when its server runs with --multicast"
	}
	if f.last != nil {
		msg += fmt.Sprintf("; last failure: %v", f.last)
	}
	return errors.Join(ctx.Err(), djinn.Errorf(djinn.Unavailable, "%s", msg))
}

func (f *finder) failure(err error) {
	f.mu.Lock()
	f.last = err
	f.mu.Unlock()
}

// watch asks one lookup service for the service until it has it or ctx
// ends, and hands what it found to run.
func (f *finder) watch(ctx context.Context, info discovery.RegistrarInfo) {
	c, err := Dial(ctx, info.Endpoint, f.opts.conn...)
	if err != nil {
		f.failure(fmt.Errorf("lookup service %s at %s: %w", info.ServiceID, info.Endpoint, err))
		return
	}
	defer c.Close()
	delay := 100 * time.Millisecond
	for {
		found, err := f.ask(ctx, c, info)
		if err != nil {
			f.failure(err)
		}
		if found != nil {
			select {
			case f.found <- found:
			case <-ctx.Done():
				found.Close()
			}
			return
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// ask looks the service up at one lookup service and connects to what it
// finds; nil when it holds none.
func (f *finder) ask(ctx context.Context, c *Client, info discovery.RegistrarInfo) (*Found, error) {
	r, err := c.Lookup(ctx)
	if err != nil {
		return nil, fmt.Errorf("lookup service %s at %s: %w", info.ServiceID, info.Endpoint, err)
	}
	it, err := r.Lookup(ctx, f.tmpl)
	if err != nil || it == nil {
		return nil, err
	}
	ref, err := djinn.ParseRef(string(it.Service))
	if err != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "found %s %s at lookup service %s: its reference is no djinn reference: %v", f.typ, it.ID, info.ServiceID, err)
	}
	sc, err := Dial(ctx, strings.Join(endpointsOf(*it, ref), ","), f.opts.conn...)
	if err != nil {
		return nil, fmt.Errorf("found %s %s: %w", f.typ, it.ID, err)
	}
	return &Found{Item: *it, Ref: ref, Client: sc, Registrar: info.ServiceID}, nil
}

// endpointsOf returns where to reach a found service: its cluster's
// members, as its djinn.Cluster entry names them, and the endpoint its
// reference names.
func endpointsOf(it service.Item, ref djinn.Ref) []string {
	eps := []string{ref.Endpoint}
	for _, e := range it.Entries {
		if e.Type != service.ClusterType {
			continue
		}
		v, _ := e.Get("members")
		members, _ := v.AsString()
		if list, err := SplitEndpoints(members); err == nil {
			for _, ep := range list {
				if ep != ref.Endpoint {
					eps = append(eps, ep)
				}
			}
		}
	}
	return eps
}
