package disk

import (
	"errors"
	"fmt"
)

// ErrDamaged is the error every DamageError matches with errors.Is.
var ErrDamaged = errors.New("damaged on disk")

// DamageError reports a store file that cannot be read back as written.
type DamageError struct {
	// Path is the damaged file.
	Path string
	// Offset is where the damage starts in it; -1 when it is the whole
	// file.
	Offset int64
	// Problem says what is wrong, for example "a frame fails its checksum
	// and valid frames follow it".
	Problem string
}

func (e *DamageError) Error() string {
	if e.Offset < 0 {
		return e.Path + ": " + e.Problem
	}
	return fmt.Sprintf("%s at offset %d: %s", e.Path, e.Offset, e.Problem)
}

// Unwrap makes the error match ErrDamaged.
func (e *DamageError) Unwrap() error { return ErrDamaged }

// WithRecovery returns err followed by how to recover, if err is damage
// (errors.Is(err, ErrDamaged)); other errors are returned as they are.
// The layer that knows the operator's means adds it, once.
func WithRecovery(err error, advice string) error {
	if !errors.Is(err, ErrDamaged) {
		return err
	}
	return fmt.Errorf("%w; to recover: %s", err, advice)
}
