package server

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/backoff"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/proto/statepb"
)

// QuotaConfig is the [quota] section: what each principal may hold
// (DESIGN.md 7), by the key of its quota (package quota); 0 is no limit.
// It binds under mutual TLS, where client certificates name principals:
// without it every caller is the one local principal, bounded only by the
// services' own totals (lookup max-items, lock max-owners, …), which bind
// in every case. The peers — the cluster's own servers — have no
// per-principal limit.
type QuotaConfig struct {
	Leases               int64 `toml:"leases"`
	MailboxRegistrations int64 `toml:"mailbox-registrations"`
	StoredEvents         int64 `toml:"mailbox-stored-events"`
	Transactions         int64 `toml:"transactions"`
	Participants         int64 `toml:"participants"`
	LockSets             int64 `toml:"lock-sets"`
	LockOwners           int64 `toml:"lock-owners"`
	LockWaiters          int64 `toml:"lock-waiters"`
	LookupItems          int64 `toml:"lookup-items"`
	LookupWatches        int64 `toml:"lookup-watches"`
	RenewalSets          int64 `toml:"renewal-sets"`
	RenewalLeases        int64 `toml:"renewal-leases"`
	LDSRegistrations     int64 `toml:"lds-registrations"`
	// Streams bounds the concurrent streams (pulls, renewal streams,
	// lookup streams) a principal has open on one server.
	Streams int64 `toml:"streams"`
	// CallsInFlight bounds the calls a principal has in flight on one
	// server, unary and carried in all its sessions together (calls.go).
	CallsInFlight int64 `toml:"calls-in-flight"`
	// Principals are principals' own quotas, in place of the defaults
	// above: [quota.principals."cn:batch"] lookup-items = 500000.
	Principals map[string]map[string]int64 `toml:"principals"`
}

// defaultQuota is the [quota] section of Default: a tenth of what a
// server holds in all, or so, for each principal.
func defaultQuota() QuotaConfig {
	return QuotaConfig{
		Leases: 1_000_000, MailboxRegistrations: 100_000, StoredEvents: 1_000_000,
		Transactions: 100_000, Participants: 1_000_000,
		LockSets: 1_000_000, LockOwners: 100_000, LockWaiters: 100_000,
		LookupItems: 100_000, LookupWatches: 10_000,
		RenewalSets: 100_000, RenewalLeases: 1_000_000, LDSRegistrations: 10_000,
		Streams: 1_000, CallsInFlight: 1_024,
	}
}

// perPrincipal returns the section's defaults by quota name (the fields'
// keys).
func (c *QuotaConfig) perPrincipal() map[quota.Name]int64 {
	out := map[quota.Name]int64{}
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Int64 {
			out[quota.Name(v.Type().Field(i).Tag.Get("toml"))] = f.Int()
		}
	}
	return out
}

func (c *QuotaConfig) check() error {
	for name, v := range c.perPrincipal() {
		if v < 0 {
			return djinn.Errorf(djinn.InvalidArgument, "quota %s %d: must not be negative (0 is no limit)", name, v)
		}
	}
	known := c.perPrincipal()
	for p, qs := range c.Principals {
		if err := principal.Check(p); err != nil {
			return djinn.Errorf(djinn.InvalidArgument, "quota principals: %v", err)
		}
		for name, v := range qs {
			if _, ok := known[quota.Name(name)]; !ok {
				return djinn.Errorf(djinn.InvalidArgument, "quota principals %q: unknown quota %q; want one of %v", p, name, slices.Sorted(func(yield func(string) bool) {
					for n := range known {
						if !yield(string(n)) {
							return
						}
					}
				}))
			}
			if v < 0 {
				return djinn.Errorf(djinn.InvalidArgument, "quota principals %q %s %d: must not be negative (0 is no limit)", p, name, v)
			}
		}
	}
	return nil
}

// quotaLimits are the limits this server's configuration puts in force
// when it leads: the services' totals, and under mutual TLS the [quota]
// section's per principal.
func (s *Server) quotaLimits() quota.Limits {
	c := s.cfg
	totals := map[quota.Name]int64{
		quota.MailboxRegistrations: int64(c.Mailbox.MaxRegistrations),
		quota.Transactions:         int64(c.Txn.MaxActive),
		quota.LockSets:             int64(c.Lock.MaxSets),
		quota.LockOwners:           int64(c.Lock.MaxOwners),
		quota.LookupItems:          int64(c.Lookup.MaxItems),
		quota.LookupWatches:        100_000, // the lookup service's own bound
		quota.RenewalSets:          int64(c.Renewal.MaxSets),
		quota.RenewalLeases:        int64(c.Renewal.MaxLeases),
		quota.LDSRegistrations:     int64(c.LDS.MaxRegistrations),
	}
	lim := quota.Limits{}
	for name, total := range totals {
		lim[name] = quota.Limit{Total: total}
	}
	if !c.TLS.ClientAuth {
		return lim
	}
	for name, per := range c.Quota.perPrincipal() {
		if name == quota.Streams || name == quota.CallsInFlight {
			continue // counted by each server, not replicated
		}
		l := lim[name]
		l.PerPrincipal = per
		l.Principals = map[string]int64{principal.Peer: 0}
		for p, qs := range c.Quota.Principals {
			if v, ok := qs[string(name)]; ok {
				l.Principals[p] = v
			}
		}
		lim[name] = l
	}
	return lim
}

// proposeQuotas puts this server's limits in force as it starts leading,
// unless they are already; it keeps trying while it leads. False when
// the term ended first.
func (s *Server) proposeQuotas(ctx context.Context) bool {
	want := s.quotaLimits()
	for b := backoff.New(100*time.Millisecond, 5*time.Second); !s.machine.Leases.Quotas().Limits().Equal(want); {
		_, err := s.node.Propose(ctx, &statepb.Command{Op: &statepb.Command_Quotas{Quotas: want.Proto()}})
		if err == nil {
			break
		}
		s.log.Warn("putting the quotas in force failed; retrying", "err", err, "within", b.Next())
		if !b.Wait(ctx) {
			return false
		}
	}
	return true
}

// streams counts each principal's open streams on this server, against
// the streams quota (under mutual TLS; the peers have none).
type streams struct {
	mutual bool
	quota  QuotaConfig
	mu     sync.Mutex
	open   map[string]int64 // guarded by mu
}

func newStreams(c Config) *streams {
	return &streams{mutual: c.TLS.ClientAuth, quota: c.Quota, open: map[string]int64{}}
}

// limitOf returns principal p's limit (0: none).
func (st *streams) limitOf(p string) int64 {
	if !st.mutual || p == principal.Peer {
		return 0
	}
	if v, ok := st.quota.Principals[p][string(quota.Streams)]; ok {
		return v
	}
	return st.quota.Streams
}

// take counts a stream p opens, or refuses it past p's limit.
func (st *streams) take(p string) error {
	limit := st.limitOf(p)
	st.mu.Lock()
	defer st.mu.Unlock()
	if limit > 0 && st.open[p] >= limit {
		return djinn.Errorf(djinn.ResourceExhausted, "quota %s: principal %q has %d streams open on this server, its limit; close some first, or ask an operator to raise [quota] %s",
			quota.Streams, p, st.open[p], quota.Streams)
	}
	st.open[p]++
	return nil
}

// done counts a stream of p's closed.
func (st *streams) done(p string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.open[p]--; st.open[p] <= 0 {
		delete(st.open, p)
	}
}
