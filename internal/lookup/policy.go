package lookup

import (
	"math"
	"time"

	"github.com/djinn-go/djinn"
)

// LeasePolicy decides how long a registration's lease is granted for. Like
// Reggie, it bounds the rate at which all registrations together renew:
// with n registrations each renewing about once per lease, the renewals
// arrive at about n/L per unit of time for leases of length L, so granting
// leases of at least n×MinRenewalInterval keeps that rate at or below one
// per MinRenewalInterval. The maximum lease therefore grows with the
// number of registrations:
//
//	Limit(n) = max(Maximum, n × MinRenewalInterval)   (saturating at Forever)
//
// and a request for d is granted
//
//	Any      → min(Default, Limit(n))
//	Forever  → Limit(n)
//	d > 0    → min(d, Limit(n))
//
// Other durations (zero, negative other than Any) are refused, as for
// every lease (djinn.CheckLeaseDuration). Integer arithmetic only, so
// every replica computes the same grant.
type LeasePolicy struct {
	// Default is granted for Any. 0 < Default <= Maximum.
	Default time.Duration
	// Maximum is the longest lease granted while there are few
	// registrations (Reggie's minMaxServiceLease). Forever allows leases
	// that never end.
	Maximum time.Duration
	// MinRenewalInterval is the least average time between two renewals
	// the registrar wants to see, all registrations together (Reggie's
	// minRenewalInterval); 0 keeps the maximum at Maximum.
	MinRenewalInterval time.Duration
}

// DefaultLeasePolicy returns Reggie's defaults: 5 minute leases, growing
// past 3000 registrations so that renewals stay under 10 a second.
func DefaultLeasePolicy() LeasePolicy {
	return LeasePolicy{Default: 5 * time.Minute, Maximum: 5 * time.Minute, MinRenewalInterval: 100 * time.Millisecond}
}

// Validate checks the policy's fields.
func (p LeasePolicy) Validate() error {
	switch {
	case p.Maximum <= 0:
		return djinn.Errorf(djinn.InvalidArgument, "lease policy maximum %s: must be positive", djinn.FormatDuration(p.Maximum))
	case p.Default <= 0 || p.Default > p.Maximum:
		return djinn.Errorf(djinn.InvalidArgument, "lease policy default %s: must be positive and at most the maximum %s", djinn.FormatDuration(p.Default), djinn.FormatDuration(p.Maximum))
	case p.MinRenewalInterval < 0:
		return djinn.Errorf(djinn.InvalidArgument, "lease policy minimum renewal interval %s: must not be negative", p.MinRenewalInterval)
	}
	return nil
}

// Limit returns the longest lease granted while there are registrations
// registrations.
func (p LeasePolicy) Limit(registrations int) (time.Duration, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	if registrations < 0 {
		return 0, djinn.Errorf(djinn.InvalidArgument, "registrations %d: must not be negative", registrations)
	}
	n, iv := int64(registrations), int64(p.MinRenewalInterval)
	if iv > 0 && n > math.MaxInt64/iv {
		return djinn.Forever, nil
	}
	return max(p.Maximum, time.Duration(n*iv)), nil
}

// Grant returns the lease granted for a request of requested while there
// are registrations registrations.
func (p LeasePolicy) Grant(requested time.Duration, registrations int) (time.Duration, error) {
	if err := djinn.CheckLeaseDuration("registration lease duration", requested); err != nil {
		return 0, err
	}
	limit, err := p.Limit(registrations)
	if err != nil {
		return 0, err
	}
	if requested == djinn.Any {
		requested = p.Default
	}
	return min(requested, limit), nil
}
