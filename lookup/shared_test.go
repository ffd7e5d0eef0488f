package lookup

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/service"
)

// Test helpers shared by the package's own tests and the external ones
// (package lookup_test, which run real servers): exported here, in a test
// file, so both can use them.

// NameEntry is a Name entry named v.
func NameEntry(v string) service.Entry {
	return service.Entry{Type: "Name", Fields: []service.Field{{Name: "name", Value: service.NewString(v)}}}
}

// NameTemplate matches the Name entries named v.
func NameTemplate(v string) service.EntryTemplate {
	return service.EntryTemplate{Type: "Name", Fields: []service.Field{{Name: "name", Value: service.NewString(v)}}}
}

// HasName reports whether it has a Name entry named v.
func HasName(it *service.Item, v string) bool {
	return it != nil && slices.ContainsFunc(it.Entries, func(e service.Entry) bool {
		got, ok := e.Get("name")
		return e.Type == "Name" && ok && got == service.NewString(v)
	})
}

// Printer is a printer's item named v.
func Printer(id djinn.ID, v string) service.Item {
	return service.Item{ID: id, Service: []byte("127.0.0.1:9"), Types: []string{"Printer"}, Entries: []service.Entry{NameEntry(v)}}
}

// Recorded is one call to a Recorder.
type Recorded struct {
	Kind      string // added, removed, changed
	Pre, Post *service.Item
}

// ID is the service the call is about.
func (r Recorded) ID() djinn.ID {
	if r.Post != nil {
		return r.Post.ID
	}
	return r.Pre.ID
}

// Recorder is a ServiceDiscoveryListener that records its calls and checks
// that they never overlap.
type Recorder struct {
	running atomic.Int32
	overlap atomic.Bool

	mu    sync.Mutex
	calls []Recorded // guarded by mu
}

func (r *Recorder) record(kind string, ev ServiceDiscoveryEvent) {
	if r.running.Add(1) > 1 {
		r.overlap.Store(true)
	}
	defer r.running.Add(-1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, Recorded{kind, ev.Pre, ev.Post})
}

func (r *Recorder) ServiceAdded(ev ServiceDiscoveryEvent)   { r.record("added", ev) }
func (r *Recorder) ServiceRemoved(ev ServiceDiscoveryEvent) { r.record("removed", ev) }
func (r *Recorder) ServiceChanged(ev ServiceDiscoveryEvent) { r.record("changed", ev) }

// Got returns the calls so far.
func (r *Recorder) Got() []Recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Overlapped reports whether two calls ever overlapped.
func (r *Recorder) Overlapped() bool { return r.overlap.Load() }

// Call names a listener call as WantCalls expects it.
func Call(kind string, id djinn.ID) string { return kind + " " + id.String()[:8] }

// WantCalls checks calls against want, in order.
func WantCalls(t *testing.T, got []Recorded, want ...string) {
	t.Helper()
	var kinds []string
	for _, c := range got {
		kinds = append(kinds, c.Kind+" "+c.ID().String()[:8])
	}
	if !slices.Equal(kinds, want) {
		t.Fatalf("listener calls %q, want %q", kinds, want)
	}
}
