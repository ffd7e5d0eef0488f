package discovery

import (
	"errors"

	"github.com/djinn-go/djinn"
)

// The package's sentinel errors. Errors about bytes from the network match
// the sentinels of the wire codec instead (ErrMalformed and friends, which
// this package re-exports), and every error matches a djinn error kind.
var (
	// ErrClosed: the Registrar or discovery utility was closed. Kind
	// Unavailable.
	ErrClosed error = djinn.Errorf(djinn.Unavailable, "discovery: closed")
	// ErrAllGroups: AddGroups or RemoveGroups on a utility that discovers
	// every group, where adding or removing one means nothing (Jini throws
	// UnsupportedOperationException there). Kind Unsupported.
	ErrAllGroups error = djinn.Errorf(djinn.Unsupported, "discovery: discovering all groups: set the groups first")
	// ErrMulticastDisabled: a group operation on a LookupDiscoveryManager
	// made with DisableMulticast. Kind Unsupported.
	ErrMulticastDisabled error = djinn.Errorf(djinn.Unsupported, "discovery: multicast discovery is disabled")
)

// errForbiddenTarget is what the registrar's dialer returns for an address a
// multicast request may not name; see Registrar.
var errForbiddenTarget = errors.New("discovery: multicast request names an address it may not name")
