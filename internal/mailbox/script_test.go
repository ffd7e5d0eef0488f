package mailbox_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/mailbox"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// TestScripts runs the mailbox protocol scripts under testdata/: the
// commands the mailbox logs, applied to its replicated state, each
// followed by what it answered and the registration after it. Rewrite the
// expected output with -rewrite.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		w := &mailboxWorld{}
		w.log = statetest.For(func(m *state.Machine) *mailbox.State { return mailbox.NewState(m.Leases, 3, m.ServiceID) })
		datadriven.RunTest(t, path, w.run)
	})
}

// mailboxWorld is the mailbox's state over a log. A registration named r
// has the id r, the listener r-listener and the lease cookie r-lease; it
// holds at most 3 events.
type mailboxWorld struct {
	log statetest.Service[*mailbox.State]
}

func named(name string) []byte {
	var c djinn.ID
	copy(c[:], name)
	return c[:]
}

func unname(b []byte) string { return strings.TrimRight(string(b), "\x00") }

func scriptRef(name string) *djinnpb.Ref {
	return &djinnpb.Ref{Endpoint: "127.0.0.1:9", ServiceId: named(name), ObjectId: named(name)}
}

// event parses source:id:seq.
func scriptEvent(t *testing.T, d *datadriven.TestData, s string) *djinnpb.RemoteEvent {
	f := strings.Split(s, ":")
	if len(f) != 3 {
		d.Fatalf(t, "event %q: want source:id:seq", s)
	}
	id, err1 := strconv.ParseInt(f[1], 10, 64)
	seq, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		d.Fatalf(t, "event %q: want source:id:seq", s)
	}
	return &djinnpb.RemoteEvent{Source: scriptRef(f[0]), EventId: id, Sequence: seq}
}

func (w *mailboxWorld) propose(cmd *statepb.Command) (any, error) {
	return w.log.Propose(context.Background(), cmd)
}

func (w *mailboxWorld) run(t *testing.T, d *datadriven.TestData) string {
	var reg string
	d.ScanArgs(t, "reg", &reg)
	id := named(reg)
	var out string
	var err error
	switch d.Cmd {
	case "register":
		exp := time.Now().Add(time.Hour).UnixNano()
		_, err = w.propose(&statepb.Command{Op: &statepb.Command_MailboxRegister{MailboxRegister: &statepb.MailboxRegister{
			RegistrationId: id, ListenerId: named(reg + "-listener"), Cookie: named(reg + "-lease"), ExpiresUnixNanos: exp, HorizonUnixNanos: exp}}})
	case "notify":
		out, err = w.notify(t, d, reg)
	case "enable":
		var target string
		d.ScanArgs(t, "target", &target)
		_, err = w.propose(&statepb.Command{Op: &statepb.Command_MailboxEnable{MailboxEnable: &statepb.MailboxEnable{RegistrationId: id, Target: scriptRef(target)}}})
	case "disable":
		_, err = w.propose(&statepb.Command{Op: &statepb.Command_MailboxDisable{MailboxDisable: &statepb.MailboxDisable{RegistrationId: id, DeliveryFailed: d.HasArg("failed")}}})
	case "delivered":
		var through uint64
		d.ScanArgs(t, "through", &through)
		_, err = w.propose(&statepb.Command{Op: &statepb.Command_MailboxDelivered{MailboxDelivered: &statepb.MailboxDelivered{
			Entries: []*statepb.Delivered{{RegistrationId: id, ThroughIndex: through}}}}})
	case "unknown":
		var key string
		d.ScanArgs(t, "key", &key)
		ev := scriptEvent(t, d, key+":0")
		_, err = w.propose(&statepb.Command{Op: &statepb.Command_MailboxUnknown{MailboxUnknown: &statepb.MailboxUnknown{
			RegistrationId: id, Keys: []*djinnpb.EventKey{{Source: ev.Source, EventId: ev.EventId}}}}})
	case "pull":
		var res any
		res, err = w.propose(&statepb.Command{Op: &statepb.Command_MailboxPull{MailboxPull: &statepb.MailboxPull{RegistrationId: id}}})
		if b, ok := res.(mailbox.PullBegun); ok {
			out = fmt.Sprintf("pull stream %d\n", b.Pull)
		}
	case "lease-ends":
		_, err = w.propose(&statepb.Command{Op: &statepb.Command_LeaseExpire{LeaseExpire: &statepb.LeaseExpire{Cookies: [][]byte{named(reg + "-lease")}}}})
	case "show":
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	if err != nil {
		out += fmt.Sprintf("error: %v\n", err)
	}
	return out + w.show(reg)
}

// notify stores events sent to the registration's listener, in order,
// until one is refused.
func (w *mailboxWorld) notify(t *testing.T, d *datadriven.TestData, reg string) (string, error) {
	var evs []string
	d.ScanArgs(t, "events", &evs)
	c := &statepb.MailboxStore{ListenerId: named(reg + "-listener")}
	for _, e := range evs {
		c.Events = append(c.Events, scriptEvent(t, d, e))
	}
	res, err := w.propose(&statepb.Command{Op: &statepb.Command_MailboxStore{MailboxStore: c}})
	if err != nil {
		return "", err
	}
	r := res.(mailbox.StoreResult)
	out := fmt.Sprintf("stored %d of %d\n", r.Accepted, len(evs))
	if r.Err != nil {
		out += fmt.Sprintf("refused: %v\n", r.Err)
	}
	return out, nil
}

// show prints a registration: its target, its unknown events and the
// events it stores, by index.
func (w *mailboxWorld) show(reg string) string {
	in, err := w.log.State.Get(djinn.ID(named(reg)))
	if err != nil {
		return fmt.Sprintf("%s: %v", reg, err)
	}
	var b strings.Builder
	target := "none"
	if in.Target != nil {
		target = unname(in.Target.GetObjectId())
	}
	fmt.Fprintf(&b, "%s: delivery to %s", reg, target)
	for _, k := range in.Unknown {
		fmt.Fprintf(&b, "\n  unknown: %s:%d", unname(k.GetSource().GetObjectId()), k.GetEventId())
	}
	for _, r := range w.log.State.Records() {
		if unname(r.GetRegistrationId()) != reg {
			continue
		}
		for _, e := range r.GetEvents() {
			ev := e.GetEvent()
			fmt.Fprintf(&b, "\n  %d: %s:%d:%d", e.GetIndex(), unname(ev.GetSource().GetObjectId()), ev.GetEventId(), ev.GetSequence())
		}
	}
	return b.String()
}
