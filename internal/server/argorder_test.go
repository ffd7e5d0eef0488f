package server_test

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Arguments before ownership (DESIGN.md 7 and 8): a call whose argument
// is malformed whatever it names — a negative duration, a mode out of
// range, an empty or oversized field, an id or a reference that does not
// parse — is answered InvalidArgument naming the value, the same for the
// resource's owner, for another principal and for a resource that never
// existed; only a well-formed call meets the ownership check, and there
// another principal's resource answers as one that never existed. A check
// that depends on the resource's state (a mode the holder does not hold)
// comes after the ownership check, so it tells nothing to another.

// stateChecks are the argument checks that depend on the resource's
// state, by method: a part of the owner's error that names one. Under an
// owner rule the owner's call is refused by what its resource holds, and
// another's "not found" before it looks; under a capability rule whoever
// presents the capability is refused alike, and a call on a resource that
// does not exist "not found".
var stateChecks = map[string]string{
	// EM.4: acknowledging events not stored yet.
	mailboxSvc + "Ack": "past the last event stored",
	// A fence the set has not granted yet.
	lockSvc + "ValidateFence": "never granted by lock set",
	// A change's type against the supertypes the item's entries name.
	lookupSvc + "ModifyAttributes": "nor a supertype of it",
}

// TestArgumentsCheckedBeforeOwnership drives every unary RPC under an
// owner or a capability rule, on its own and carried in a session, with
// each of its matrix row's requests with one field at an edge of its
// range (TestEveryRPCTakesEdgeValues' mutations), as (a) another
// principal on resources that never existed, (b) another principal on
// the owner's resources (presenting the owner's capability, for a
// capability rule), (c) the owner on its own. When any of them is
// answered InvalidArgument, all three must be, with the same message but
// for the ids the requests carry; under an owner rule (a) and (b) answer
// alike for every mutation (nothing tells another principal's resource
// from one that never existed).
func TestArgumentsCheckedBeforeOwnership(t *testing.T) {
	t.Parallel()
	e := newMatrixEnv(t)
	rows, access, unary := matrixRows(), server.AccessOf(e.srv), server.SessionMethods(e.srv)
	ids := regexp.MustCompile(`[0-9a-f]{32}|\d{6,}`) // the ids sent: 128-bit in hex, transaction ids
	shape := func(err error) string {
		if err == nil {
			return "no error"
		}
		msg := err.Error()
		if len(msg) > 1000 { // an oversized value the message repeats
			msg = msg[:1000]
		}
		return string(djinn.KindOf(err)) + ": " + ids.ReplaceAllString(msg, "ID")
	}
	newID := func() []byte { id := djinn.NewID(); return id[:] }
	checked, rpcs, stated := 0, map[string]bool{}, map[string]bool{}
	for _, m := range slices.Sorted(maps.Keys(rows)) {
		a := access[m]
		if (a != server.Owner && a != server.Capability) || !unary[m] {
			continue
		}
		t.Run(strings.ReplaceAll(strings.TrimPrefix(m, "/djinn.v1."), "/", "."), func(t *testing.T) {
			// capture returns the request m's row makes on r.
			capture := func(r *resources, real bool) proto.Message {
				cp := &capture{ClientConnInterface: e.conns[asOwner], method: m}
				ctx, cancel := context.WithTimeout(context.Background(), matrixTimeout)
				defer cancel()
				_ = rows[m](ctx, cp, r, real)
				if cp.req == nil {
					t.Fatalf("%s: its matrix row made no call of it", m)
				}
				return cp.req
			}
			owners := &resources{t: t, owner: e.conns[asOwner], srv: e.srv, caller: asOwner}
			own := mutations(capture(owners, true))
			mb := owners.mailbox()
			never := &resources{t: t, owner: e.conns[asOwner], srv: e.srv, caller: asOther,
				mreg:   &djinnpb.MailboxRegistration{RegistrationId: newID(), Lease: &djinnpb.Lease{Cookie: newID(), Landlord: mb.GetLease().GetLandlord()}, Listener: &djinnpb.Ref{Endpoint: mb.GetListener().GetEndpoint(), ServiceId: mb.GetListener().GetServiceId(), ObjectId: newID()}},
				rset:   &djinnpb.RenewalSet{Set: &djinnpb.Ref{ObjectId: newID()}},
				tx:     &djinnpb.CreatedTransaction{Id: 12345678901, Secret: newID(), Manager: owners.txn().GetManager()},
				lset:   &djinnpb.LockSetCreated{SetId: newID()},
				tset:   &djinnpb.LockSetCreated{SetId: newID()},
				held:   true,
				item:   &djinnpb.ServiceRegistration{Lease: &djinnpb.Lease{Cookie: newID()}},
				ldsReg: &djinnpb.LDSRegistration{Registration: &djinnpb.EventRegistration{Lease: &djinnpb.Lease{Cookie: newID()}}},
			}
			unknown := mutations(capture(never, false))
			for _, name := range slices.Sorted(maps.Keys(own)) {
				// The session path is driven with the malformed
				// arguments the direct path finds: it runs the same
				// edge (TestAuthorizationNotFoundAsNeverExisted drives
				// it with well-formed ones).
				malformed := false
				for _, p := range paths {
					if p.name != "" && !malformed {
						continue
					}
					call := func(id identity, req proto.Message) error {
						ctx, cancel := context.WithTimeout(context.Background(), matrixTimeout)
						defer cancel()
						return p.conn(e.conns[id]).Invoke(ctx, m, req, newOutput(t, m))
					}
					errA := call(asOther, unknown[name])
					errB := call(asOther, own[name])
					errC := call(asOwner, own[name])
					checked++
					sa, sb, sc := shape(errA), shape(errB), shape(errC)
					inv := func(err error) bool { return djinn.KindOf(err) == djinn.InvalidArgument }
					switch {
					case inv(errA) || inv(errB) || inv(errC):
						malformed = true
						rpcs[m] = true
						if marker, ok := stateChecks[m]; ok && inv(errC) && strings.Contains(sc, marker) {
							stated[m] = true
							alike := sa == sb && !inv(errB) // another principal's is not found
							if a == server.Capability {
								alike = sb == sc // the capability's holder is refused as its owner
							}
							if inv(errA) || !alike {
								t.Errorf("%s%s with %s (a check on the resource's state): (a) unknown id %q, (b) another principal's %q, (c) the owner's %q; want (a) not found, and (b) as (a) under an owner rule, as (c) under a capability",
									m, p.name, name, clip(sa), clip(sb), clip(sc))
							}
							break
						}
						if sa != sb || sb != sc || !inv(errA) {
							t.Errorf("%s%s with %s: (a) unknown id %q, (b) another principal's %q, (c) the owner's %q; want InvalidArgument, the same for all",
								m, p.name, name, clip(sa), clip(sb), clip(sc))
						}
					case a == server.Owner && sa != sb:
						t.Errorf("%s%s with %s as another principal: on the owner's resources %q, on ones that never existed %q", m, p.name, name, clip(sb), clip(sa))
					}
				}
			}
		})
	}
	t.Logf("%d mutations × 3 callers; %d RPCs refuse some InvalidArgument", checked, len(rpcs))
	for m := range stateChecks {
		if !stated[m] {
			t.Errorf("%s: no call was refused by its check on the resource's state (%q): drop it from stateChecks, or make the row reach it", m, stateChecks[m])
		}
	}
	if len(rpcs) == 0 {
		t.Error("no call was refused InvalidArgument: the mutations reach no argument check")
	}
}

// clip shortens an answer for a test's message.
func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
