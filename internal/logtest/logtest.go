// Package logtest keeps what a logger writes, for a test to read while
// the code under test may still be logging from other goroutines.
package logtest

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is an io.Writer for a slog handler whose contents a test reads
// at any time; its zero value is ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns the lines written so far (none when nothing was).
func (b *Buffer) Lines() []string {
	s := strings.TrimSpace(b.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
