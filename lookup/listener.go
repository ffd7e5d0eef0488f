package lookup

import "github.com/djinn-go/djinn/service"

// ItemFilter selects service items beyond what a template can say (Jini's
// ServiceItemFilter): it returns whether to keep the item. It gets a copy
// of the item. A cache calls it from its own goroutine each time an item
// arrives or changes, so it must be quick, deterministic (the same item,
// the same answer) and must not call the cache's methods.
type ItemFilter func(service.Item) bool

// ServiceDiscoveryEvent is a change of a LookupCache (Jini's
// ServiceDiscoveryEvent): the service's item before and after it. Pre is
// nil for an addition, Post for a removal. The items are the listener's
// own copies.
type ServiceDiscoveryEvent struct {
	Pre, Post *service.Item
}

// ServiceDiscoveryListener hears of a LookupCache's changes (Jini's
// ServiceDiscoveryListener): a service was added to the cache, removed
// from it, or its item changed. A cache calls its listeners from one
// goroutine, one call at a time, in the order the changes happened. A
// listener may call the cache's Lookup, LookupN and AddListener, but not
// Terminate (nor the manager's), which waits for the listener to return;
// a slow listener delays the cache's later changes, not other caches.
type ServiceDiscoveryListener interface {
	ServiceAdded(ServiceDiscoveryEvent)
	ServiceRemoved(ServiceDiscoveryEvent)
	ServiceChanged(ServiceDiscoveryEvent)
}

// ListenerFuncs is a ServiceDiscoveryListener made of functions; a nil
// function ignores its kind of change.
type ListenerFuncs struct {
	Added, Removed, Changed func(ServiceDiscoveryEvent)
}

var _ ServiceDiscoveryListener = ListenerFuncs{}

// ServiceAdded calls f.Added.
func (f ListenerFuncs) ServiceAdded(ev ServiceDiscoveryEvent) {
	if f.Added != nil {
		f.Added(ev)
	}
}

// ServiceRemoved calls f.Removed.
func (f ListenerFuncs) ServiceRemoved(ev ServiceDiscoveryEvent) {
	if f.Removed != nil {
		f.Removed(ev)
	}
}

// ServiceChanged calls f.Changed.
func (f ListenerFuncs) ServiceChanged(ev ServiceDiscoveryEvent) {
	if f.Changed != nil {
		f.Changed(ev)
	}
}
