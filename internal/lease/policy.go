package lease

import (
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// LandlordID is the object id of every djinn server's Landlord: a lease's
// landlord reference is the granting server's endpoint and service id with
// this object id, so all leases of one cluster batch together.
var LandlordID = djinn.ID{'l', 'a', 'n', 'd', 'l', 'o', 'r', 'd'}

// Proto builds the wire form of a lease granted by the server self (its
// endpoint and service id), with remaining time left.
func Proto(self djinn.Ref, cookie djinn.ID, remaining time.Duration) *djinnpb.Lease {
	// The lease, its landlord and the bytes they hold in one allocation.
	p := &struct {
		lease    djinnpb.Lease
		landlord djinnpb.Ref
		service  djinn.ID
		cookie   djinn.ID
	}{service: self.Service, cookie: cookie}
	p.landlord = djinnpb.Ref{Endpoint: self.Endpoint, ServiceId: p.service[:], ObjectId: LandlordID[:]}
	p.lease = djinnpb.Lease{
		Landlord:      &p.landlord,
		Cookie:        p.cookie[:],
		DurationNanos: int64(remaining),
		Format:        djinnpb.SerialFormat_SERIAL_FORMAT_DURATION,
	}
	return &p.lease
}

// Kind says which service owns a lease. Each owner declares its kinds and
// registers them with the state machine (state.LeaseKind), which hands a
// lease that ends to the owner of its kind; the number travels in the log
// and in snapshots, so once used it never changes.
type Kind uint32

// Owner is the resource a lease guards.
type Owner struct {
	Kind Kind
	ID   djinn.ID
}

// Policy is a service's lease policy: what Any gets and the longest lease it
// grants. Max == djinn.Forever allows Forever leases.
type Policy struct {
	Default time.Duration
	Max     time.Duration
}

// DefaultPolicy grants 5 minutes for Any and at most an hour.
var DefaultPolicy = Policy{Default: 5 * time.Minute, Max: time.Hour}

// Check reports whether p is usable.
func (p Policy) Check() error {
	if p.Default <= 0 || p.Max <= 0 || p.Default > p.Max {
		return djinn.Errorf(djinn.InvalidArgument, "lease policy default %s max %s: want 0 < default <= max",
			djinn.FormatDuration(p.Default), djinn.FormatDuration(p.Max))
	}
	return nil
}

// Grant negotiates the duration of a new lease (LE.2.2): Any gets the
// default, requests above the maximum get the maximum. The request must
// already have passed the service's argument rules.
func (p Policy) Grant(requested time.Duration) time.Duration {
	if requested == djinn.Any {
		return p.Default
	}
	if requested > p.Max {
		return p.Max
	}
	return requested
}

// Renewal negotiates a renewal given the time the lease has left: like Grant,
// but a renewal never shortens a lease below its remaining time unless the
// holder asked for less.
func (p Policy) Renewal(requested, remaining time.Duration) time.Duration {
	g := p.Grant(requested)
	if g < remaining && (requested == djinn.Any || requested >= remaining) {
		return remaining
	}
	return g
}

// CheckRenewal enforces the renewal argument rule: a duration is positive,
// Forever or Any — the rule of a new lease, since "a renewed lease is just
// like any other lease" (LE.2.1). Zero is refused as a grant of zero is;
// a holder done with a lease cancels it.
func CheckRenewal(d time.Duration) error {
	if d > 0 || d == djinn.Any {
		return nil
	}
	return djinn.Errorf(djinn.InvalidArgument, "lease duration %s: must be positive, Forever or Any (to end a lease, cancel it)", djinn.FormatDuration(d))
}
