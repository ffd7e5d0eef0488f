package mailbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/mailbox"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// TestLooseTargetFromBeforeStillLoads: a delivery target (EM.4.1 enable)
// taken before endpoints were checked strictly — its host has a space —
// is in logs and snapshots written then. Its entry still applies as it
// replays and a snapshot holding it still loads, with the target as it
// was: what was acknowledged is never refused. A target handed in now
// with such an endpoint is refused, naming it.
func TestLooseTargetFromBeforeStillLoads(t *testing.T) {
	newState := func(m *state.Machine) *mailbox.State { return mailbox.NewState(m.Leases, 3, m.ServiceID) }
	log := statetest.For(newState)
	const loose = "old host:9"
	target := &djinnpb.Ref{Endpoint: loose, ServiceId: named("elsewhere"), ObjectId: named("listener")}
	id := named("r")
	exp := time.Now().Add(time.Hour).UnixNano()
	for _, c := range []*statepb.Command{
		{Op: &statepb.Command_MailboxRegister{MailboxRegister: &statepb.MailboxRegister{
			RegistrationId: id, ListenerId: named("r-listener"), Cookie: named("r-lease"), ExpiresUnixNanos: exp, HorizonUnixNanos: exp}}},
		{Op: &statepb.Command_MailboxEnable{MailboxEnable: &statepb.MailboxEnable{RegistrationId: id, Target: target}}},
	} {
		if _, err := log.Propose(context.Background(), c); err != nil {
			t.Fatalf("replaying an entry from before: %v", err)
		}
	}
	again, err := statetest.Restart(log.Log, newState)
	if err != nil {
		t.Fatalf("loading a snapshot holding a target from before: %v", err)
	}
	var rid djinn.ID
	copy(rid[:], id)
	in, err := again.State.Get(rid)
	if err != nil || in.Target.Endpoint != loose {
		t.Fatalf("after a restore: %+v %v, want the target at %q", in.Target, err, loose)
	}
	err = again.State.CheckTarget(target)
	if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), `"old host:9"`) {
		t.Fatalf("the same target handed in now: %v, want InvalidArgument naming it", err)
	}
}
