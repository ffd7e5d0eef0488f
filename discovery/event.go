package discovery

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/djinn-go/djinn"
	wire "github.com/djinn-go/djinn/internal/discovery"
)

// Locator is where a lookup service's unicast discovery server listens: the
// host and port of a jini:// URL. See ParseLocator.
type Locator = wire.Locator

// DefaultPort is the port of the multicast groups and of a jini:// URL that
// names none: 4160.
const DefaultPort = wire.DefaultPort

// ParseLocator parses a jini:// URL (jini://host, jini://host:port, with or
// without a final slash; an IPv6 address in brackets). The result is
// canonical, so == compares locators.
func ParseLocator(s string) (Locator, error) { return wire.ParseLocator(s) }

// NewLocator returns the canonical locator of a host and port.
func NewLocator(host string, port int) (Locator, error) { return wire.NewLocator(host, port) }

// The errors of the wire codec, for errors.Is on what a unicast exchange
// returns: a peer that broke the layout, spoke another protocol version or
// format, shares no format with us, or sent too much.
var (
	ErrMalformed = wire.ErrMalformed
	ErrVersion   = wire.ErrVersion
	ErrFormat    = wire.ErrFormat
	ErrNoFormat  = wire.ErrNoFormat
	ErrTooLarge  = wire.ErrTooLarge
)

// RegistrarInfo is a lookup service as discovery found it: what a client
// needs to call it and what it told about itself.
type RegistrarInfo struct {
	// ServiceID is the registrar's service id.
	ServiceID djinn.ID
	// Groups are its member groups, as its last unicast answer gave them.
	Groups []string
	// Endpoint is its gRPC endpoint, "host:port".
	Endpoint string
	// Locator is its unicast discovery address as it names itself.
	Locator Locator
}

func infoOf(r wire.UnicastResponse) RegistrarInfo {
	return RegistrarInfo{ServiceID: r.ServiceID, Groups: r.Groups, Endpoint: r.Endpoint, Locator: r.Locator}
}

// clone returns a copy that shares no slice with info.
func (info RegistrarInfo) clone() RegistrarInfo {
	info.Groups = slices.Clone(info.Groups)
	return info
}

// sameAs reports whether two answers of one registrar say the same thing
// (groups compared as sets).
func (info RegistrarInfo) sameAs(o RegistrarInfo) bool {
	return info.ServiceID == o.ServiceID && info.Endpoint == o.Endpoint &&
		info.Locator == o.Locator && sameGroups(info.Groups, o.Groups)
}

// EventKind says what happened to a registrar.
type EventKind int

// The event kinds: the three of Jini's DiscoveryListener and
// DiscoveryChangeListener.
const (
	// Discovered: the registrar is new to this utility.
	Discovered EventKind = iota + 1
	// Discarded: the utility dropped the registrar; Reason says why. It
	// can be discovered again later. The registrar is as the utility last
	// knew it: for NoInterest, with the groups that made it unwanted when
	// its own groups changed.
	Discarded
	// Changed: a discovered registrar's groups, endpoint or locator
	// changed, and it is still wanted.
	Changed
)

func (k EventKind) String() string {
	switch k {
	case Discovered:
		return "discovered"
	case Discarded:
		return "discarded"
	case Changed:
		return "changed"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Reason says why a registrar was discarded.
type Reason int

// The discard reasons.
const (
	// ByUser: Discard was called.
	ByUser Reason = iota + 1
	// NoInterest: none of its member groups is wanted any more, because
	// the utility's groups changed or the registrar's did.
	NoInterest
	// Unreachable: its multicast announcements stopped for three intervals
	// and a unicast check failed too.
	Unreachable
	// Left: it announced that it belongs to no group, its last
	// announcement before it stops, and a unicast check could not reach it.
	Left
	// Removed: its locator was removed from a locator discovery.
	Removed
)

func (r Reason) String() string {
	switch r {
	case ByUser:
		return "discarded by the user"
	case NoInterest:
		return "no wanted group"
	case Unreachable:
		return "announcements stopped and unreachable"
	case Left:
		return "left"
	case Removed:
		return "locator removed"
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}

// Event is one change of a discovery utility's set of registrars.
type Event struct {
	Kind      EventKind
	Registrar RegistrarInfo
	// Reason is set for Discarded events.
	Reason Reason
}

func (e Event) String() string {
	s := fmt.Sprintf("%v %v at %v %q groups %q", e.Kind, e.Registrar.ServiceID, e.Registrar.Locator, e.Registrar.Endpoint, e.Registrar.Groups)
	if e.Kind == Discarded {
		s += ": " + e.Reason.String()
	}
	return s
}

// notifier delivers events in order from a goroutine of its own, to a
// listener function or on a channel, so that the protocol goroutines never
// wait for the user. Its queue is unbounded: it holds at most a few events
// per registrar change.
type notifier struct {
	listener func(Event) // nil: deliver on out
	out      chan Event  // nil with a listener; closed when run returns

	mu    sync.Mutex
	queue []Event // guarded by mu
	wake  chan struct{}
}

func newNotifier(listener func(Event)) *notifier {
	n := &notifier{listener: listener, wake: make(chan struct{}, 1)}
	if listener == nil {
		n.out = make(chan Event)
	}
	return n
}

// push queues events; it never blocks.
func (n *notifier) push(events ...Event) {
	n.mu.Lock()
	n.queue = append(n.queue, events...)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// run delivers events until ctx is done; undelivered events are dropped.
func (n *notifier) run(ctx context.Context) {
	if n.out != nil {
		defer close(n.out)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.wake:
		}
		for {
			n.mu.Lock()
			if len(n.queue) == 0 {
				n.mu.Unlock()
				break
			}
			e := n.queue[0]
			n.queue[0] = Event{}
			n.queue = n.queue[1:]
			n.mu.Unlock()
			if n.listener != nil {
				if ctx.Err() != nil {
					return
				}
				n.listener(e)
				continue
			}
			select {
			case n.out <- e:
			case <-ctx.Done():
				return
			}
		}
	}
}
