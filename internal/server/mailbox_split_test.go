package server_test

import (
	"testing"

	"github.com/djinn-go/djinn/client"
)

// A batch of stored events larger than a client receives in one message
// (4 MiB by default) reaches it whole and in order, over a pull stream, a
// delivery stream of its own and a shared one (EM.2: events are
// delivered in the order the mailbox stored them): the server sends it in
// several messages. Before, each went in one message of every event of
// the batch (256 of up to 64 KiB) and the client failed to receive it.
func TestMailboxLargeBatchesReachTheClient(t *testing.T) {
	t.Parallel()
	f := newMailboxFixture(t, nil)
	const events = 100 // of 60 KB each: 6 MB, a batch of the default 256
	regs := []*client.MailboxRegistration{f.register(t), f.register(t), f.register(t)}
	for _, reg := range regs {
		for seq := int64(1); seq <= events; seq++ {
			ev := &client.RemoteEvent{Source: f.gen.src, ID: 1, Seq: seq, Handback: make([]byte, 60_000)}
			if err := client.Notify(testContext(t), f.c, reg.Listener, ev); err != nil {
				t.Fatalf("notify %d: %v", seq, err)
			}
		}
	}
	check := func(how string, got []client.StoredEvent) {
		t.Helper()
		if len(got) != events {
			t.Fatalf("%s: %d events, want %d", how, len(got), events)
		}
		for i, se := range got {
			if se.Event.Seq != int64(i+1) || len(se.Event.Handback) != 60_000 {
				t.Fatalf("%s: event %d is seq %d with a %d-byte handback, want seq %d, 60000", how, i, se.Event.Seq, len(se.Event.Handback), i+1)
			}
		}
	}

	var pulled []client.StoredEvent
	for se, err := range regs[0].Pull(testContext(t), 0) {
		if err != nil {
			t.Fatalf("pull: %v", err)
		}
		if pulled = append(pulled, se); len(pulled) == events {
			break
		}
	}
	check("pull", pulled)

	for i, opts := range [][]client.DeliveryOption{{client.DeliveryOwnStream()}, nil} {
		how := [...]string{"a delivery stream of its own", "a shared delivery stream"}[i]
		s, err := regs[1+i].Deliveries(testContext(t), opts...)
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		var got []client.StoredEvent
		for len(got) < events {
			batch, err := s.Recv()
			if err != nil {
				t.Fatalf("%s after %d events: %v", how, len(got), err)
			}
			got = append(got, batch...)
		}
		check(how, got)
	}
}
