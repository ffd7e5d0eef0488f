package lookup

import (
	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/service"
)

// What the external tests (package lookup_test) need of the package's
// insides. Those tests run real djinn servers, whose package
// (internal/server) uses this one, so they cannot be inside it.

// RegistrationAt returns m's registration at the lookup service id, nil
// when there is none.
func (m *JoinManager) RegistrationAt(id djinn.ID) *client.ServiceRegistration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if j := m.joins[id]; j != nil {
		return j.reg
	}
	return nil
}

// Joining reports whether m still joins the lookup service id: it was
// discovered, and not discarded since.
func (m *JoinManager) Joining(id djinn.ID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.joins[id] != nil
}

// Terminating reports whether Terminate or Abandon has been called.
func (m *JoinManager) Terminating() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.terminated
}

// ItemsEqual is itemsEqual.
var ItemsEqual = itemsEqual

// CacheReg is what a cache has at one lookup service.
type CacheReg struct {
	ER      *client.EventRegistration
	Syncing bool
	Items   map[djinn.ID]service.Item
}

// OnLoop queues f on the cache's loop, where it may call Registrations,
// and returns a channel closed once f ran: every piece of work queued
// before it has been done.
func (c *LookupCache) OnLoop(f func()) <-chan struct{} {
	done := make(chan struct{})
	c.in.push(func() {
		defer close(done)
		f()
	})
	return done
}

// Registrations returns what the cache has at each lookup service; call it
// on the loop (OnLoop).
func (c *LookupCache) Registrations() map[djinn.ID]CacheReg {
	out := map[djinn.ID]CacheReg{}
	for id, cr := range c.regs {
		out[id] = CacheReg{ER: cr.er, Syncing: cr.syncing, Items: cr.items}
	}
	return out
}

// Follows reports whether m's connections follow the djinn cluster whose
// service id is service (its leases' renewals reach any member).
func (m *JoinManager) Follows(service djinn.ID) bool { return m.pool.Follows(service) }
