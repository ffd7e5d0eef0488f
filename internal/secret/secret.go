package secret

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/djinn-go/djinn"
)

// FileName is the join secret's file in a data directory.
const FileName = "join-secret"

// Header is the gRPC metadata key that carries a join secret.
const Header = "djinn-join-secret"

// Secret is a join secret.
type Secret [16]byte

// New returns a new random secret.
func New() Secret {
	var s Secret
	_, _ = rand.Read(s[:]) // never fails (Go 1.24+)
	return s
}

// String returns the secret as 32 lower-case hex digits.
func (s Secret) String() string { return hex.EncodeToString(s[:]) }

// Parse reads a secret's text form: 32 hex digits, surrounding white space
// ignored. The error never repeats the text, which may be a secret.
func Parse(text string) (Secret, error) {
	var s Secret
	t := strings.TrimSpace(text)
	if len(t) != 2*len(s) {
		return s, djinn.Errorf(djinn.InvalidArgument, "join secret: %d characters, want %d hex digits", len(t), 2*len(s))
	}
	if _, err := hex.Decode(s[:], []byte(t)); err != nil {
		return Secret{}, djinn.Errorf(djinn.InvalidArgument, "join secret: not hex digits")
	}
	return s, nil
}

// Matches reports, in constant time, whether text is the secret's text
// form (upper- or lower-case).
func (s Secret) Matches(text string) bool {
	got, err := Parse(text)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(got[:], s[:]) == 1
}

// Load reads the secret stored at path.
func Load(path string) (Secret, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Secret{}, err
	}
	s, err := Parse(string(b))
	if err != nil {
		return Secret{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Write stores the secret at path, readable by its owner alone. It
// refuses to replace a file that is there.
func (s Secret) Write(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s.String() + "\n")
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}
