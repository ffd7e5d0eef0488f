package discovery

import (
	"slices"

	wire "github.com/djinn-go/djinn/internal/discovery"
)

// wanted is the set of groups a discovering utility looks for: every group,
// or those of set (none: discover nothing by group).
type wanted struct {
	all bool
	set map[string]struct{}
}

func newWanted(groups []string, all bool) wanted {
	w := wanted{all: all, set: make(map[string]struct{}, len(groups))}
	if !all {
		for _, g := range groups {
			w.set[g] = struct{}{}
		}
	}
	return w
}

// wants reports whether a registrar with these member groups is wanted. A
// registrar of no group is never discovered by group, not even by a utility
// that wants every group: it has left them all.
func (w wanted) wants(groups []string) bool {
	if w.all {
		return len(groups) > 0
	}
	for _, g := range groups {
		if _, ok := w.set[g]; ok {
			return true
		}
	}
	return false
}

// list returns the wanted groups, sorted (none when all).
func (w wanted) list() []string {
	out := make([]string, 0, len(w.set))
	for g := range w.set {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

// none reports whether nothing is wanted.
func (w wanted) none() bool { return !w.all && len(w.set) == 0 }

// sameGroups compares two group lists as sets.
func sameGroups(a, b []string) bool {
	as, bs := slices.Clone(a), slices.Clone(b)
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(slices.Compact(as), slices.Compact(bs))
}

// normalGroups returns groups sorted without duplicates, after checking that
// each can travel in a multicast packet: valid text that fits in one
// packet with a short host. Bad groups are an error of kind InvalidArgument
// that names the group.
func normalGroups(groups []string) ([]string, error) {
	if len(groups) > 0 {
		// The encoder checks every group and that each fits a packet.
		req := wire.MulticastRequest{Host: "localhost", Port: DefaultPort, Groups: groups}
		if _, err := wire.EncodeMulticastRequest(req); err != nil {
			return nil, err
		}
	}
	out := slices.Clone(groups)
	slices.Sort(out)
	return slices.Compact(out), nil
}
