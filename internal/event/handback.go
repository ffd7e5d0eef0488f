package event

import "github.com/djinn-go/djinn"

// MaxHandback bounds a registration's handback, the bytes every one of its
// events carries back to its listener (EV.2.3.2): handbacks are opaque,
// size-capped bytes, and every service that takes one checks it here.
const MaxHandback = 64 << 10

// CheckHandback refuses a handback larger than MaxHandback.
func CheckHandback(handback []byte) error {
	if len(handback) > MaxHandback {
		return djinn.Errorf(djinn.InvalidArgument, "handback of %d bytes: at most %d; keep a key in it and the rest on your side", len(handback), MaxHandback)
	}
	return nil
}
