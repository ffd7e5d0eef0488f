package lookup

import (
	"fmt"

	"github.com/djinn-go/djinn"
)

// The errors of this package. Match with errors.Is.
var (
	// ErrTerminated is what calls on a terminated JoinManager,
	// ServiceDiscoveryManager or LookupCache return. Its kind is
	// djinn.Unavailable, so errors.Is(err, djinn.ErrUnavailable) holds too.
	ErrTerminated error = &djinn.Error{Kind: djinn.Unavailable, Message: "terminated"}
)

// terminated returns ErrTerminated naming what was terminated.
func terminated(what string) error { return fmt.Errorf("%s: %w", what, ErrTerminated) }
