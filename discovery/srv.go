package discovery

import (
	"cmp"
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/djinn-go/djinn"
)

// SRVResolver looks up DNS SRV records; *net.Resolver is one, and tests
// pass their own.
type SRVResolver interface {
	LookupSRV(ctx context.Context, service, proto, name string) (cname string, addrs []*net.SRV, err error)
}

// LookupSRV returns the locators that the DNS SRV records of
// _jini._tcp.<domain> name, for networks without multicast: lowest
// priority first, then highest weight, without duplicates. A nil resolver
// is net.DefaultResolver. A domain that says the service is not available
// (a single record with target ".") gives no locators and no error.
func LookupSRV(ctx context.Context, r SRVResolver, domain string) ([]Locator, error) {
	if r == nil {
		r = net.DefaultResolver
	}
	domain = strings.TrimSuffix(domain, ".")
	if domain == "" {
		return nil, djinn.Errorf(djinn.InvalidArgument, "srv domain: empty")
	}
	_, recs, err := r.LookupSRV(ctx, "jini", "tcp", domain)
	if err != nil {
		return nil, djinn.Errorf(djinn.Unavailable, "srv records of _jini._tcp.%s: %v", domain, err)
	}
	recs = slices.Clone(recs)
	recs = slices.DeleteFunc(recs, func(s *net.SRV) bool { return s == nil })
	slices.SortStableFunc(recs, func(a, b *net.SRV) int {
		if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
			return c
		}
		return cmp.Compare(b.Weight, a.Weight)
	})
	var out []Locator
	for _, s := range recs {
		host := strings.TrimSuffix(s.Target, ".")
		if host == "" {
			continue // "." : no service here
		}
		loc, err := NewLocator(host, int(s.Port))
		if err != nil {
			return nil, djinn.Errorf(djinn.InvalidArgument, "srv record of _jini._tcp.%s: target %q port %d: %v", domain, s.Target, s.Port, err)
		}
		if !slices.Contains(out, loc) {
			out = append(out, loc)
		}
	}
	return out, nil
}

// ParseSeeds parses static seeds, the other way to find registrars without
// multicast: each a jini:// URL, "host", "host:port", "[ipv6]:port" or a
// bare IPv6 address, the port 4160 by default. Duplicates are dropped.
func ParseSeeds(seeds ...string) ([]Locator, error) {
	out := make([]Locator, 0, len(seeds))
	for _, s := range seeds {
		var loc Locator
		var err error
		switch a, perr := netip.ParseAddr(s); {
		case perr == nil:
			loc, err = NewLocator(a.String(), DefaultPort)
		case strings.Contains(s, "://"):
			loc, err = ParseLocator(s)
		default:
			loc, err = ParseLocator("jini://" + s)
		}
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, loc) {
			out = append(out, loc)
		}
	}
	return out, nil
}
