package lds

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/discovery"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Bounds on a registration's managed sets, and on what the state takes from
// discovery.
const (
	// MaxGroups bounds the groups of a registration's managed set.
	MaxGroups = 256
	// MaxLocators bounds the locators of a registration's managed set.
	MaxLocators = 256
	// maxRegistrarGroups bounds the member groups of a lookup service
	// discovery found.
	maxRegistrarGroups = 4096
)

// Registrar is a lookup service as the leader's discovery found it.
type Registrar struct {
	ID       djinn.ID
	Endpoint string   // its gRPC endpoint, host:port
	Locator  string   // where it says it answers unicast discovery, canonical jini://host:port/
	Groups   []string // its member groups, sorted without duplicates
}

// Proto returns the wire form of r.
func (r Registrar) Proto() *djinnpb.DiscoveredRegistrar {
	return &djinnpb.DiscoveredRegistrar{ServiceId: bytes.Clone(r.ID[:]), Endpoint: r.Endpoint, Locator: r.Locator, Groups: slices.Clone(r.Groups)}
}

// RegistrarFromProto checks a discovered lookup service: a non-zero
// 16-byte service id, a host:port endpoint (djinn.CheckEndpoint), a
// jini:// locator (made canonical) and valid member groups (sorted,
// without duplicates).
func RegistrarFromProto(pb *djinnpb.DiscoveredRegistrar) (Registrar, error) {
	return registrarFromProto(pb, djinn.CheckEndpoint)
}

// storedRegistrar is RegistrarFromProto for a lookup service read back
// from the log or a snapshot: its endpoint is checked as
// djinn.CheckStoredEndpoint takes it, so that one taken before endpoints
// were checked strictly still replays and loads.
func storedRegistrar(pb *djinnpb.DiscoveredRegistrar) (Registrar, error) {
	return registrarFromProto(pb, djinn.CheckStoredEndpoint)
}

func registrarFromProto(pb *djinnpb.DiscoveredRegistrar, checkEndpoint func(string) error) (Registrar, error) {
	if pb == nil {
		return Registrar{}, djinn.Errorf(djinn.InvalidArgument, "registrar: missing")
	}
	id, err := djinn.IDFromBytes("registrar service id", pb.GetServiceId())
	if err != nil {
		return Registrar{}, err
	}
	if id.IsZero() {
		return Registrar{}, djinn.Errorf(djinn.InvalidArgument, "registrar service id %s: zero", id)
	}
	if err := checkEndpoint(pb.GetEndpoint()); err != nil {
		return Registrar{}, djinn.Errorf(djinn.InvalidArgument, "registrar %s: %v", id, err)
	}
	loc, err := discovery.ParseLocator(pb.GetLocator())
	if err != nil {
		return Registrar{}, djinn.Errorf(djinn.InvalidArgument, "registrar %s: %v", id, err)
	}
	groups, err := CheckGroups(fmt.Sprintf("registrar %s groups", id), pb.GetGroups(), maxRegistrarGroups)
	if err != nil {
		return Registrar{}, err
	}
	return Registrar{ID: id, Endpoint: pb.GetEndpoint(), Locator: loc.String(), Groups: groups}, nil
}

// CheckGroups checks group names ("" is the public group) and returns them
// sorted without duplicates. A name must be text a multicast packet can
// carry (DESIGN.md 5); more than most distinct names is ResourceExhausted.
// Errors name what and the bad group.
func CheckGroups(what string, groups []string, most int) ([]string, error) {
	out := slices.Clone(groups)
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > most {
		return nil, djinn.Errorf(djinn.ResourceExhausted, "%s: %d groups, at most %d", what, len(out), most)
	}
	for _, g := range out {
		// The encoder checks the text, and that it fits a packet.
		if _, err := discovery.EncodeMulticastRequest(discovery.MulticastRequest{Host: "localhost", Port: discovery.DefaultPort, Groups: []string{g}}); err != nil {
			return nil, djinn.Errorf(djinn.InvalidArgument, "%s: group %q: %v", what, clip(g), err)
		}
	}
	return out, nil
}

// CheckGroupsChange checks the arguments of a change of a registration's
// managed groups that do not depend on the registration (LD.4.1.1): the
// operation, all groups (with set alone, and no names) and the names
// (CheckGroups). It returns the names as CheckGroups does.
func CheckGroupsChange(op djinnpb.SetOp, all bool, groups []string) ([]string, error) {
	if err := checkSetOp("groups", op); err != nil {
		return nil, err
	}
	in, err := CheckGroups("groups", groups, MaxGroups)
	if err != nil {
		return nil, err
	}
	if all && (op != djinnpb.SetOp_SET_OP_SET || len(in) > 0) {
		return nil, djinn.Errorf(djinn.InvalidArgument, "%s groups: all groups goes only with set, and without group names", opName(op))
	}
	return in, nil
}

// CheckLocatorsChange checks the arguments of a change of a
// registration's managed locators that do not depend on the registration:
// the operation and the locators (CheckLocators), which it returns as
// CheckLocators does.
func CheckLocatorsChange(op djinnpb.SetOp, locators []string) ([]string, error) {
	if err := checkSetOp("locators", op); err != nil {
		return nil, err
	}
	return CheckLocators("locators", locators)
}

// checkSetOp refuses an operation on a managed set other than add, set
// and remove.
func checkSetOp(what string, op djinnpb.SetOp) error {
	switch op {
	case djinnpb.SetOp_SET_OP_ADD, djinnpb.SetOp_SET_OP_SET, djinnpb.SetOp_SET_OP_REMOVE:
		return nil
	}
	return djinn.Errorf(djinn.InvalidArgument, "%s operation %d: want add, set or remove", what, op)
}

// CheckLocators parses jini:// locators and returns them canonical, sorted
// and without duplicates (two spellings of one locator are one, as
// LookupLocator.equals has it). More than MaxLocators distinct ones is
// ResourceExhausted. Errors name what and the bad locator.
func CheckLocators(what string, locators []string) ([]string, error) {
	out := make([]string, 0, len(locators))
	for _, s := range locators {
		l, err := discovery.ParseLocator(s)
		if err != nil {
			return nil, djinn.Errorf(djinn.InvalidArgument, "%s: %v", what, err)
		}
		out = append(out, l.String())
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxLocators {
		return nil, djinn.Errorf(djinn.ResourceExhausted, "%s: %d locators, at most %d", what, len(out), MaxLocators)
	}
	return out, nil
}

// clip shortens a long bad value for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// contains reports whether the sorted set has x.
func contains(set []string, x string) bool {
	_, ok := slices.BinarySearch(set, x)
	return ok
}

// union returns the sorted union of two sorted sets.
func union(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// minus returns the sorted set a without the elements of sorted b.
func minus(a, b []string) []string {
	return slices.DeleteFunc(slices.Clone(a), func(x string) bool { return contains(b, x) })
}
