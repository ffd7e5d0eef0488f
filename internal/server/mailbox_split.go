package server

import (
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn/internal/mailbox"
)

// eventMessageBytes bounds the events of one message of a pull or delivery
// stream: a batch of stored events larger than that goes out in several
// messages, in order (an event larger than that alone in one), so that no
// message passes the bound of one reply (wire.MaxReply, within what a
// client receives by default) — a batch may hold 4096 events of up to
// 64 KiB each.
const eventMessageBytes = 1 << 20

// eventSize is an event's share of a message: its encoding, its index and
// their framing.
func eventSize(e mailbox.Stored) int {
	return proto.Size(e.Event) + 24
}

// eventChunk returns how many of events, from the first, go in one
// message: at least one, and no more than eventMessageBytes hold.
func eventChunk(events []mailbox.Stored) int {
	size := 0
	for i, e := range events {
		n := eventSize(e)
		if i > 0 && size+n > eventMessageBytes {
			return i
		}
		size += n
	}
	return len(events)
}

// splitParts returns the messages a shared stream sends parts in: parts
// in order, no message holding more than eventMessageBytes of events
// unless one event alone does. A part whose events do not fit one message
// is split: its events go in order over several, and its recorded
// acknowledgement, end and error ride with the last of them. Parts that
// fit one message together (the usual case) are one message, as given.
func splitParts(parts []mailbox.SharedPart) [][]mailbox.SharedPart {
	if !overBudget(parts) {
		return [][]mailbox.SharedPart{parts}
	}
	var msgs [][]mailbox.SharedPart
	var cur []mailbox.SharedPart
	size := 0
	add := func(p mailbox.SharedPart, n int) {
		if len(cur) > 0 && size+n > eventMessageBytes {
			msgs, cur, size = append(msgs, cur), nil, 0
		}
		cur, size = append(cur, p), size+n
	}
	for _, p := range parts {
		events := p.Events
		for {
			k := eventChunk(events)
			n := 0
			for _, e := range events[:k] {
				n += eventSize(e)
			}
			if k == len(events) {
				p.Events = events
				add(p, n)
				break
			}
			add(mailbox.SharedPart{ID: p.ID, Events: events[:k]}, n)
			events = events[k:]
		}
	}
	return append(msgs, cur)
}

// overBudget reports whether the events of parts need more than one
// message.
func overBudget(parts []mailbox.SharedPart) bool {
	total := 0
	for i := range parts {
		for _, e := range parts[i].Events {
			total += eventSize(e)
		}
	}
	return total > eventMessageBytes
}
