package participant

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/djinn-go/djinn"
)

// queueWriters starts n Applies while a flush is marked under way, and
// returns once all n wait in the queue; their results come on the channel.
func queueWriters(t *testing.T, s *FileStore, n int) <-chan error {
	t.Helper()
	s.mu.Lock()
	s.flushing = true
	s.mu.Unlock()
	out := make(chan error, n)
	for i := range n {
		go func() {
			var b Batch
			b.Put(fmt.Sprintf("w%02d", i), []byte("v"))
			out <- s.Apply(context.Background(), &b)
		}()
	}
	for {
		s.mu.Lock()
		queued := len(s.wakes)
		s.mu.Unlock()
		if queued == n {
			return out
		}
		runtime.Gosched()
	}
}

// TestFileStoreFlushEndWakesTheOldestWriter: when a flush ends, the
// oldest writer still queued is woken to write the next group, and the
// writers that group carries are woken by it: 16 writers queued behind a
// flush land in one write, none left waiting.
func TestFileStoreFlushEndWakesTheOldestWriter(t *testing.T) {
	s, err := OpenFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out := queueWriters(t, s, 16)
	s.mu.Lock()
	s.flushing = false
	s.wakeLocked(nil) // the end of the flush they queued behind
	s.mu.Unlock()
	for range 16 {
		if err := <-out; err != nil {
			t.Fatal(err)
		}
	}
	if batches, writes := s.Writes(); batches != 16 || writes != 1 {
		t.Errorf("Writes: %d batches in %d writes, want 16 in 1 (the oldest writer writes the group)", batches, writes)
	}
}

// TestFileStoreCloseWakesEveryWriter: writers queued when the store
// closes are all woken and told it is closed.
func TestFileStoreCloseWakesEveryWriter(t *testing.T) {
	s, err := OpenFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := queueWriters(t, s, 16)
	s.mu.Lock()
	s.flushing = false // no flush: Close does not wait
	s.mu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range 16 {
		if err := <-out; !errors.Is(err, djinn.ErrUnavailable) {
			t.Errorf("a writer queued at Close: %v, want Unavailable (closed)", err)
		}
	}
}
