package lookup

import (
	"bytes"
	"slices"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/service"
)

// Event is what a change tells a watch (a ServiceEvent's content). Item is
// the item after the change, nil when it was removed (Jini's
// ServiceEvent.getServiceItem); so a MatchNoMatch caused by a change that
// left the item registered carries the item. The events of one call share
// one Item: treat it as read-only.
type Event struct {
	Watch      djinn.ID
	ServiceID  djinn.ID
	Transition service.Transition
	Item       *service.Item
}

// watch is a notify registration.
type watch struct {
	id   djinn.ID
	tmpl *service.Matcher
	mask service.Transition
}

// watchIndex holds the watches, each in exactly one bucket: by the service
// id its template names, else by its template's first service type, else
// by its first entry template's type, else among the rest, which every
// change checks. A change to item X need only look at the bucket of X's
// id, of each of X's types and entries' type names (before and after the
// change), and the rest: a watch in any other bucket matches X neither
// before nor after.
type watchIndex struct {
	all         map[djinn.ID]*watch
	byService   map[djinn.ID]map[djinn.ID]*watch
	byType      map[service.Name]map[djinn.ID]*watch
	byEntryType map[service.Name]map[djinn.ID]*watch
	rest        map[djinn.ID]*watch
}

func newWatchIndex() watchIndex {
	return watchIndex{
		all:         map[djinn.ID]*watch{},
		byService:   map[djinn.ID]map[djinn.ID]*watch{},
		byType:      map[service.Name]map[djinn.ID]*watch{},
		byEntryType: map[service.Name]map[djinn.ID]*watch{},
		rest:        map[djinn.ID]*watch{},
	}
}

func bucketAdd[K comparable](m map[K]map[djinn.ID]*watch, k K, w *watch) {
	b := m[k]
	if b == nil {
		b = map[djinn.ID]*watch{}
		m[k] = b
	}
	b[w.id] = w
}

func bucketDelete[K comparable](m map[K]map[djinn.ID]*watch, k K, id djinn.ID) {
	b := m[k]
	delete(b, id)
	if len(b) == 0 {
		delete(m, k)
	}
}

func (x *watchIndex) add(w *watch) {
	x.all[w.id] = w
	id, hasID := w.tmpl.ID()
	switch t := w.tmpl; {
	case hasID:
		bucketAdd(x.byService, id, w)
	case len(t.Types()) > 0:
		bucketAdd(x.byType, t.Types()[0], w)
	case t.NumEntries() > 0:
		bucketAdd(x.byEntryType, t.EntryType(0), w)
	default:
		x.rest[w.id] = w
	}
}

func (x *watchIndex) remove(w *watch) {
	delete(x.all, w.id)
	id, hasID := w.tmpl.ID()
	switch t := w.tmpl; {
	case hasID:
		bucketDelete(x.byService, id, w.id)
	case len(t.Types()) > 0:
		bucketDelete(x.byType, t.Types()[0], w.id)
	case t.NumEntries() > 0:
		bucketDelete(x.byEntryType, t.EntryType(0), w.id)
	default:
		delete(x.rest, w.id)
	}
}

// candidates returns the watches that may match pre or post (either may
// be nil), in no particular order.
func (x *watchIndex) candidates(pre, post *item) []*watch {
	var out []*watch
	add := func(b map[djinn.ID]*watch) {
		for _, w := range b {
			out = append(out, w)
		}
	}
	id := itemID(pre, post)
	add(x.byService[id])
	add(x.rest)
	if len(x.byType) > 0 {
		seen := map[service.Name]bool{}
		for _, it := range []*item{pre, post} {
			if it == nil {
				continue
			}
			for _, t := range it.Types() {
				if !seen[t] {
					seen[t] = true
					add(x.byType[t])
				}
			}
		}
	}
	if len(x.byEntryType) > 0 {
		seen := map[service.Name]bool{}
		for _, it := range []*item{pre, post} {
			if it == nil {
				continue
			}
			for i := range it.NumEntries() {
				for _, t := range it.EntryTypes(i) {
					if !seen[t] {
						seen[t] = true
						add(x.byEntryType[t])
					}
				}
			}
		}
	}
	return out
}

func itemID(pre, post *item) djinn.ID {
	if pre != nil {
		return pre.ID()
	}
	return post.ID()
}

// AddWatch adds a watch (a notify registration's matching part): from now
// on every change to an item that makes one of the transitions in
// transitions for tmpl yields an Event for id. The caller assigns the id,
// which must be new. Adding a watch yields no events.
func (r *Registry) AddWatch(id djinn.ID, tmpl service.Template, transitions service.Transition) error {
	return r.addWatch(r.lim, id, tmpl, transitions)
}

func (r *Registry) addWatch(lim service.Limits, id djinn.ID, tmpl service.Template, transitions service.Transition) error {
	if id.IsZero() {
		return djinn.Errorf(djinn.InvalidArgument, "watch id %s: zero (the caller assigns ids)", id)
	}
	if err := transitions.Check(); err != nil {
		return err
	}
	t, err := lim.Matcher(tmpl)
	if err != nil {
		return err
	}
	if _, ok := r.watches.all[id]; ok {
		return djinn.Errorf(djinn.InvalidArgument, "watch id %s: already in use", id)
	}
	r.watches.add(&watch{id: id, tmpl: t, mask: transitions})
	return nil
}

// RemoveWatch removes a watch: its lease ended or was cancelled.
func (r *Registry) RemoveWatch(id djinn.ID) error {
	w, ok := r.watches.all[id]
	if !ok {
		return djinn.Errorf(djinn.NoSuchObject, "watch %s: no such watch (its lease ended or was cancelled)", id)
	}
	r.watches.remove(w)
	return nil
}

// notify returns the events of a change from pre to post (nil pre: a new
// registration; nil post: a removal), in watch id order. Callers only call
// it for a real change or a re-registration.
func (r *Registry) notify(pre, post *item) []Event {
	var events []Event
	var pub *service.Item
	for _, w := range r.watches.candidates(pre, post) {
		before := pre != nil && w.tmpl.Matches(&pre.Record)
		after := post != nil && w.tmpl.Matches(&post.Record)
		var tr service.Transition
		switch {
		case before && after:
			tr = service.MatchMatch
		case before:
			tr = service.MatchNoMatch
		case after:
			tr = service.NoMatchMatch
		}
		if tr == 0 || w.mask&tr == 0 {
			continue
		}
		if pub == nil && post != nil {
			p := post.Item()
			pub = &p
		}
		events = append(events, Event{Watch: w.id, ServiceID: itemID(pre, post), Transition: tr, Item: pub})
	}
	slices.SortFunc(events, func(a, b Event) int { return bytes.Compare(a.Watch[:], b.Watch[:]) })
	return events
}
