package secret

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/disk"
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

// Write stores the secret at path, readable by its owner alone, durably
// and atomically (disk.WriteFile: a crash leaves no file or the whole
// secret, never an empty one). It refuses to replace a file that is there
// (an error matching fs.ErrExist).
func (s Secret) Write(path string) error {
	if _, err := os.Lstat(path); err == nil {
		return &fs.PathError{Op: "write", Path: path, Err: fs.ErrExist}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return disk.WriteFile(path, []byte(s.String()+"\n"))
}
