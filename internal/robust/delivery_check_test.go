package robust

import (
	"strings"
	"testing"
)

// cleanReg is a registration whose history keeps every rule: events 1–5
// stored, a stream that got 1–3 and acknowledged through 2 before it
// failed, and a second stream that began again after the recorded 2 (3
// comes again: it was not acknowledged) and got the rest.
func cleanReg() RegLog {
	d := func(stream int, index uint64, seq int64) Delivered {
		return Delivered{Stream: stream, Index: index, Seq: seq, From: "r1", Principal: "alice", Phase: "fault 1 of 4: kill -9 leader"}
	}
	g := RegLog{Name: "r1", Principal: "alice", Shared: true, Sent: 5, Streams: []uint64{0, 2}}
	for s := int64(1); s <= 5; s++ {
		g.Acked = append(g.Acked, Notified{Seq: s, Phase: "before the faults"})
	}
	// Seq 4 was stored twice (its first Notify's answer was lost).
	g.Got = []Delivered{d(0, 1, 1), d(0, 2, 2), d(0, 3, 3), d(1, 3, 3), d(1, 4, 4), d(1, 5, 4), d(1, 6, 5)}
	return g
}

// TestDeliveryCheckerCatches: the delivery checker passes a history that
// keeps its rules (redelivery of an unacknowledged event and an event
// stored twice included) and fails, naming registration, sequence number
// and phase, each planted violation.
func TestDeliveryCheckerCatches(t *testing.T) {
	if v := CheckDeliveries([]RegLog{cleanReg()}); len(v) != 0 {
		t.Fatalf("a history that keeps the rules: %q", v)
	}
	for _, tc := range []struct {
		name  string
		plant func(g *RegLog)
		want  string
	}{
		{"lost: a stored event never delivered", func(g *RegLog) {
			g.Got = g.Got[:6]
			g.Acked[4].Phase = "fault 2 of 4: restart"
		}, `registration r1 (alice), event seq 5, phase "fault 2 of 4: restart": stored (Notify answered) but never delivered`},
		{"reordered on a stream", func(g *RegLog) {
			g.Got[4], g.Got[5] = g.Got[5], g.Got[4]
		}, "event seq 4, index 4, stream 1, phase \"fault 1 of 4: kill -9 leader\": out of order: after index 5"},
		{"reordered in storage: a later index carries an earlier event", func(g *RegLog) {
			g.Got[6].Seq, g.Sent = 3, 5
		}, "event seq 3, index 6, phase \"fault 1 of 4: kill -9 leader\": reordered, stored after seq 4 (index 5)"},
		{"gap on a stream", func(g *RegLog) {
			g.Got = append(g.Got[:4], g.Got[5:]...)
		}, "event seq 4, index 5, stream 1, phase \"fault 1 of 4: kill -9 leader\": gap: indexes 4..4 skipped"},
		{"gap at a new stream", func(g *RegLog) {
			g.Got = append(g.Got[:2], g.Got[4:]...)
			g.Acked = g.Acked[:1]
		}, "event seq 4, index 4, stream 1, phase \"fault 1 of 4: kill -9 leader\": gap: the stream began past index 2"},
		{"an acknowledged event delivered again", func(g *RegLog) {
			g.Streams[1] = 3
		}, "event seq 3, index 3, stream 1, phase \"fault 1 of 4: kill -9 leader\": delivered again though the mailbox had recorded its acknowledgement (through index 3)"},
		{"cross-principal delivery", func(g *RegLog) {
			g.Got[2].From, g.Got[2].Principal = "r9", "mallory"
		}, "registration r1 (alice), event seq 3, index 3, stream 0, phase \"fault 1 of 4: kill -9 leader\": the event of registration r9 of principal mallory reached another principal's listener"},
		{"cross-registration delivery", func(g *RegLog) {
			g.Got[2].From = "r2"
		}, "the event of registration r2 reached another registration's listener"},
		{"an index carrying two events", func(g *RegLog) {
			g.Got[3].Seq = 2
		}, "index 3 carried seq 3 before"},
		{"never sent", func(g *RegLog) {
			g.Sent = 4
		}, "event seq 5, index 6, stream 1, phase \"fault 1 of 4: kill -9 leader\": never sent (highest sent 4)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := cleanReg()
			tc.plant(&g)
			v := CheckDeliveries([]RegLog{g})
			if !strings.Contains(strings.Join(v, "\n"), tc.want) {
				t.Errorf("violations %q\nwant one containing %q", v, tc.want)
			}
		})
	}
}

// TestDeliveryCheckerExcusesEndedRegistration: events of a registration
// whose lease was cancelled may never come; its order is still checked.
func TestDeliveryCheckerExcusesEndedRegistration(t *testing.T) {
	g := cleanReg()
	g.Got = g.Got[:3]
	if v := CheckDeliveries([]RegLog{g}); len(v) != 2 {
		t.Fatalf("a live registration missing seq 4 and 5: %q, want 2 violations", v)
	}
	g.Ended = "fault 3 of 4: restart"
	if v := CheckDeliveries([]RegLog{g}); len(v) != 0 {
		t.Fatalf("an ended registration missing seq 4 and 5: %q, want none", v)
	}
	g.Got[1], g.Got[2] = g.Got[2], g.Got[1]
	if v := CheckDeliveries([]RegLog{g}); len(v) == 0 {
		t.Fatal("an ended registration's reordered delivery passed")
	}
}
