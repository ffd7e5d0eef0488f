package service

// The service types under which djinn's own services register in lookup
// services, so that a client finds one by type — "a transaction manager",
// "an event mailbox" — without knowing where it is (client.Find). Each is
// the most specific type of its item: the item's hierarchy (Hierarchy)
// makes it also the Jini interface the service implements, where Jini has
// one, and the gRPC service that serves it (djinn.v1.…), which tells a
// client in another language what to call at the item's reference. The
// names never change: clients look them up.
const (
	// LandlordType: the Landlord every lease a djinn cluster grants is
	// renewed and cancelled through.
	LandlordType = "djinn.Landlord"
	// EventMailboxType: the event mailbox, push and pull (Jini's
	// PullEventMailbox, an EventMailbox).
	EventMailboxType = "djinn.EventMailbox"
	// LeaseRenewalServiceType: the lease renewal service.
	LeaseRenewalServiceType = "djinn.LeaseRenewalService"
	// TransactionManagerType: the transaction manager.
	TransactionManagerType = "djinn.TransactionManager"
	// LockServiceType: the lock service (the OMG concurrency service's
	// lock set factory).
	LockServiceType = "djinn.LockService"
	// LookupDiscoveryServiceType: the lookup discovery service.
	LookupDiscoveryServiceType = "djinn.LookupDiscoveryService"
	// KeyValueType: a node's key/value store, a transaction participant.
	KeyValueType = "djinn.KeyValue"
)

// The entries djinn's services describe themselves with, besides those an
// operator gives them.
const (
	// ServiceInfoType is Jini's net.jini.lookup.entry.ServiceInfo: fields
	// name, manufacturer, vendor and version.
	ServiceInfoType = "net.jini.lookup.entry.ServiceInfo"
	// AbstractEntryType is the supertype of Jini's standard entries.
	AbstractEntryType = "net.jini.entry.AbstractEntry"
	// ClusterType is djinn's entry naming where a service runs: field
	// cluster (the cluster's service id, 32 hex digits), members (the
	// gRPC endpoints of its members, comma-separated: dial them to reach
	// the service whichever member serves) and, for a service of one
	// node (the key/value store), node (its node id).
	ClusterType = "djinn.Cluster"
)

// hierarchy is Hierarchy's answer: for each djinn service type (and the
// Jini types it names), the types it directly extends.
var hierarchy = map[string][]string{
	LandlordType:                      {"djinn.v1.Landlord"},
	EventMailboxType:                  {"net.jini.event.PullEventMailbox", "djinn.v1.EventMailbox"},
	"net.jini.event.PullEventMailbox": {"net.jini.event.EventMailbox"},
	LeaseRenewalServiceType:           {"net.jini.lease.LeaseRenewalService", "djinn.v1.LeaseRenewalService"},
	TransactionManagerType:            {"net.jini.core.transaction.server.TransactionManager", "djinn.v1.TransactionManager"},
	LockServiceType:                   {"org.omg.CosConcurrencyControl.LockSetFactory", "djinn.v1.LockService"},
	LookupDiscoveryServiceType:        {"net.jini.discovery.LookupDiscoveryService", "djinn.v1.LookupDiscoveryService"},
	KeyValueType:                      {"net.jini.core.transaction.server.TransactionParticipant", "djinn.v1.KeyValue", "djinn.v1.TransactionParticipant"},
}

// Hierarchy returns the type hierarchy of a djinn service type (one of
// the …Type constants), as its item declares it in Supertypes: the type's
// direct supertypes, and theirs. It is nil for any other name.
func Hierarchy(typ string) map[string][]string {
	if _, ok := hierarchy[typ]; !ok {
		return nil
	}
	out := map[string][]string{}
	for todo := []string{typ}; len(todo) > 0; todo = todo[1:] {
		t := todo[0]
		if sup, ok := hierarchy[t]; ok {
			out[t] = append([]string(nil), sup...)
			todo = append(todo, sup...)
		}
	}
	return out
}
