package server

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// parts lists the services a server runs, in the order they open, start
// and are listed (and close, in reverse). Each is defined in its own file
// beside its gRPC adapter; adding a service is that file and one line here.
var parts = []func(*Server) *part{
	landlordPart, // the lessor: first, every other service leases through it
	adminPart,
	mailboxPart,
	renewalPart,
	txnPart,
	lockPart,
	lookupPart,
	ldsPart,
	kvPart,
	participantPart, // after the participants it routes to
	joinPart,        // registers the others in lookup services
	resourcesPart,   // lists what the others hold
	sessionPart,     // any unary call of the parts before, over one stream
}

// A part is one service as the server runs it. The server iterates its
// parts for everything a service adds; every hook is optional.
type part struct {
	name string
	// enabled says whether the service serves: its configuration
	// section's switch. A disabled service keeps its replicated state, so
	// that a log written with it on still applies, and does nothing else.
	enabled bool
	// state builds the service's replicated state and adds it to the
	// machine (state.Machine.Add), before the log is replayed. It runs
	// whether or not the service is enabled.
	state func(m *state.Machine) error
	// open builds the service's core, once the log is replayed and the
	// lessor exists; it runs whether or not the service is enabled.
	open func() error
	// serve registers the service's gRPC services, each with a rule for
	// every method (registrar.serve).
	serve func(r *registrar) error
	// run is the service's leader work for one term; it returns when ctx
	// ends.
	run func(ctx context.Context)
	// serving reports whether the service's leader work serves in this
	// node's term; a leader is ready (/readyz, Status) once every enabled
	// part's does.
	serving func() bool
	// ref is the service's reference, for Describe.
	ref func() djinn.Ref
	// status fills the service's part of an Admin.Status answer: its
	// reference and its counts.
	status func(resp *djinnpb.StatusResponse)
	// metrics are the service's Prometheus collectors.
	metrics func() []prometheus.Collector
	// page is the service's page on the web console (console.go).
	page *page
	// joins, when set, makes the service register in lookup services
	// (join.go): its type and name there.
	joins *joinKind
	// stop runs first when the server closes, while it still serves: a
	// part ends there what needs the network (leaving lookup services).
	stop func()
	// list lists the service's resources for Resources.List
	// (resources.go), by kind.
	list map[string]lister
	// pages lists, for a kind its state keeps in name order, one page of
	// it at a time (in place of list, which reads every resource of the
	// kind for each page).
	pages map[string]pager
	// listFilter names, for a kind of list that takes one, the key of the
	// filter its lister reads; Resources.List refuses any other.
	listFilter map[string]string
	// close releases what open took; it runs after the node is closed.
	close func()
}

// openParts builds the parts, adds their states to the machine and checks
// the machine handles every command and record.
func (s *Server) openParts() error {
	for _, mk := range parts {
		s.parts = append(s.parts, mk(s))
	}
	for _, p := range s.parts {
		if p.state == nil {
			continue
		}
		if err := p.state(s.machine); err != nil {
			return err
		}
	}
	if missing := s.machine.Unhandled(); len(missing) > 0 {
		return djinn.Errorf(djinn.Internal, "state machine: no service handles %v", missing)
	}
	return nil
}

// openCores opens every part's core, in order. On an error, the parts
// opened so far are closed by Close.
func (s *Server) openCores() error {
	for _, p := range s.parts {
		if p.open != nil {
			if err := p.open(); err != nil {
				return err
			}
		}
		s.opened = append(s.opened, p)
	}
	return nil
}

// serveParts registers the enabled parts' gRPC services.
func (s *Server) serveParts(r *registrar) error {
	for _, p := range s.parts {
		if p.enabled && p.serve != nil {
			if err := p.serve(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// runParts runs the enabled parts' leader work until ctx ends, and waits
// for all of it.
func (s *Server) runParts(ctx context.Context, started func()) {
	var wg sync.WaitGroup
	for _, p := range s.parts {
		if p.enabled && p.run != nil {
			wg.Go(func() { p.run(ctx) })
		}
	}
	started()
	wg.Wait()
}

// partsServing reports whether every enabled part's leader work serves.
func (s *Server) partsServing() bool {
	for _, p := range s.parts {
		if p.enabled && p.serving != nil && !p.serving() {
			return false
		}
	}
	return true
}

// stopParts runs the opened parts' stop hooks, in reverse order.
func (s *Server) stopParts() {
	for i := len(s.opened) - 1; i >= 0; i-- {
		if stop := s.opened[i].stop; stop != nil {
			stop()
		}
	}
}

// closeParts closes the opened parts, in reverse order.
func (s *Server) closeParts() {
	for i := len(s.opened) - 1; i >= 0; i-- {
		if c := s.opened[i].close; c != nil {
			c()
		}
	}
	s.opened = nil
}
