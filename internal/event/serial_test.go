package event_test

import (
	"sync"
	"testing"
	"testing/synctest"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/event"
)

// Serial keeps each key's order, and one key's blocked function does not
// hold up another key's.
func TestSerialOrderPerKeyAndIndependentKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s event.Serial
		a, b := djinn.ID{'a'}, djinn.ID{'b'}
		var mu sync.Mutex
		var got []int
		block := make(chan struct{})
		s.Add(a, func() { <-block })
		for i := range 100 {
			s.Add(a, func() {
				mu.Lock()
				got = append(got, i)
				mu.Unlock()
			})
		}
		ranB := make(chan struct{})
		s.Add(b, func() { close(ranB) })
		<-ranB // b runs while a is blocked
		synctest.Wait()
		mu.Lock()
		if len(got) != 0 {
			t.Fatalf("key a ran %v past its blocked function", got)
		}
		mu.Unlock()
		close(block)
		s.Wait()
		for i, v := range got {
			if v != i {
				t.Fatalf("key a ran out of order: %v", got)
			}
		}
		if len(got) != 100 {
			t.Fatalf("key a ran %d of 100 functions", len(got))
		}
	})
}

// Do runs a function at once on the caller's goroutine when its key is
// idle, queues it behind the key's work otherwise, and what is added for
// the key while it runs runs after it.
func TestSerialDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s event.Serial
		a, b := djinn.ID{'a'}, djinn.ID{'b'}
		var got []string
		var mu sync.Mutex
		note := func(v string) func() {
			return func() {
				mu.Lock()
				got = append(got, v)
				mu.Unlock()
			}
		}
		ran := false
		s.Do(a, func() {
			ran = true // on this goroutine: no lock needed
			s.Add(a, note("added during do"))
		})
		if !ran {
			t.Fatal("Do on an idle key did not run at once")
		}
		block := make(chan struct{})
		s.Add(b, func() { <-block })
		s.Do(b, note("b after blocked"))
		synctest.Wait()
		mu.Lock()
		if len(got) != 1 || got[0] != "added during do" {
			t.Fatalf("ran %v; want only the function added during Do (b's Do waits behind its blocked one)", got)
		}
		mu.Unlock()
		close(block)
		s.Wait()
		if len(got) != 2 || got[1] != "b after blocked" {
			t.Fatalf("ran %v; want b's Do after its blocked function", got)
		}
	})
}
