package lds_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The model is LD.3 and LD.4 written out by brute force over names: every
// registration checked against every lookup service on every step, the
// table a plain map. The property test runs random calls against it and the
// state and requires the same errors (by kind), events and sets.

type mReg struct {
	all        bool
	groups     map[string]bool
	locs       map[string]bool
	discovered map[byte]bool
}

type mRegistrar struct {
	groups []string
	live   bool
}

type model struct {
	regs  map[string]*mReg
	table map[byte]*mRegistrar
	out   []string // events, as world.events writes them
}

func (g *mReg) byGroup(r *mRegistrar) bool {
	if g.all {
		return len(r.groups) > 0
	}
	for _, x := range r.groups {
		if g.groups[x] {
			return true
		}
	}
	return false
}

func (m *model) interested(g *mReg, n byte) bool {
	return g.byGroup(m.table[n]) || g.locs[loc(n)]
}

// emit records name's discarded, then discovered, event.
func (m *model) emit(name string, gone, found []byte) {
	for _, e := range []struct {
		sign string
		ns   []byte
	}{{"-", gone}, {"+", found}} {
		if len(e.ns) == 0 {
			continue
		}
		slices.Sort(e.ns)
		var rs []string
		for _, n := range e.ns {
			rs = append(rs, fmt.Sprintf("r%d", n))
		}
		m.out = append(m.out, name+e.sign+strings.Join(rs, ","))
	}
}

func (m *model) prune() {
	for n, r := range m.table {
		if r.live {
			continue
		}
		held := false
		for _, g := range m.regs {
			held = held || g.discovered[n]
		}
		if !held {
			delete(m.table, n)
		}
	}
}

// reconcile is a managed-set change's effect on name.
func (m *model) reconcile(name string) {
	g := m.regs[name]
	var gone, found []byte
	for n := range g.discovered {
		if !m.interested(g, n) {
			delete(g.discovered, n)
			gone = append(gone, n)
		}
	}
	for n, r := range m.table {
		if r.live && !g.discovered[n] && m.interested(g, n) {
			g.discovered[n] = true
			found = append(found, n)
		}
	}
	m.prune()
	m.emit(name, gone, found)
}

func setOf(xs []string) map[string]bool {
	out := map[string]bool{}
	for _, x := range xs {
		out[x] = true
	}
	return out
}

var (
	mGroups   = []string{"a", "b", "c", ""}
	mLocators = []string{loc(1), loc(2), loc(3), loc(4)}
)

// TestAgainstModel: random registrations, changes of managed sets,
// discards, lookup services found, changed and lost, lease ends and
// restarts give what the model gives.
func TestAgainstModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w := newWorld(rt)
		m := &model{regs: map[string]*mReg{}, table: map[byte]*mRegistrar{}}
		cookies := map[string]djinn.ID{}
		var names []string
		drawReg := func() (string, bool) {
			if len(names) == 0 {
				return "", false
			}
			return rapid.SampledFrom(names).Draw(rt, "registration"), true
		}
		for step := range rapid.IntRange(1, 60).Draw(rt, "steps") {
			what := ""
			switch op := rapid.IntRange(0, 10).Draw(rt, "op"); op {
			case 0:
				name := fmt.Sprintf("R%d", len(names))
				all := rapid.IntRange(0, 4).Draw(rt, "all") == 0
				var groups []string
				if !all {
					groups = rapid.SliceOfN(rapid.SampledFrom(mGroups), 0, 3).Draw(rt, "groups")
				}
				locs := rapid.SliceOfN(rapid.SampledFrom(mLocators), 0, 2).Draw(rt, "locators")
				what = fmt.Sprintf("register %s all %v groups %q locators %q", name, all, groups, locs)
				cookies[name] = w.register(name, all, groups, locs...)
				names = append(names, name)
				m.regs[name] = &mReg{all: all, groups: setOf(groups), locs: setOf(locs), discovered: map[byte]bool{}}
				m.reconcile(name)
			case 1, 2:
				name, ok := drawReg()
				if !ok {
					continue
				}
				op := rapid.SampledFrom([]string{"add", "set", "remove", "all"}).Draw(rt, "groups-op")
				groups := rapid.SliceOfN(rapid.SampledFrom(mGroups), 0, 2).Draw(rt, "groups")
				what = fmt.Sprintf("%s groups %s %q", op, name, groups)
				var err error
				switch op {
				case "add":
					err = w.groups(cookies[name], add, false, groups...)
				case "set":
					err = w.groups(cookies[name], set, false, groups...)
				case "remove":
					err = w.groups(cookies[name], rem, false, groups...)
				case "all":
					err = w.groups(cookies[name], set, true)
				}
				g := m.regs[name]
				var want error
				switch {
				case g == nil:
					want = djinn.NoSuchObject
				case g.all && (op == "add" || op == "remove"):
					want = djinn.Unsupported
				}
				if djinn.KindOf(err) != djinn.KindOf(want) || (err == nil) != (want == nil) {
					rt.Fatalf("step %d, %s: %v, model says %v", step, what, err, want)
				}
				if want != nil {
					break
				}
				switch op {
				case "add":
					for _, x := range groups {
						g.groups[x] = true
					}
				case "set":
					g.all, g.groups = false, setOf(groups)
				case "remove":
					for _, x := range groups {
						delete(g.groups, x)
					}
				case "all":
					g.all, g.groups = true, map[string]bool{}
				}
				m.reconcile(name)
			case 3:
				name, ok := drawReg()
				if !ok {
					continue
				}
				op := rapid.SampledFrom([]string{"add", "set", "remove"}).Draw(rt, "locators-op")
				locs := rapid.SliceOfN(rapid.SampledFrom(mLocators), 0, 2).Draw(rt, "locators")
				what = fmt.Sprintf("%s locators %s %q", op, name, locs)
				err := w.locators(cookies[name], map[string]djinnpb.SetOp{"add": add, "set": set, "remove": rem}[op], locs...)
				g := m.regs[name]
				if (g == nil) != (err != nil) {
					rt.Fatalf("step %d, %s: %v, model has the registration: %v", step, what, err, g != nil)
				}
				if g == nil {
					break
				}
				switch op {
				case "add":
					for _, x := range locs {
						g.locs[x] = true
					}
				case "set":
					g.locs = setOf(locs)
				case "remove":
					for _, x := range locs {
						delete(g.locs, x)
					}
				}
				m.reconcile(name)
			case 4:
				name, ok := drawReg()
				if !ok {
					continue
				}
				n := byte(rapid.IntRange(1, 4).Draw(rt, "registrar"))
				what = fmt.Sprintf("discard %s r%d", name, n)
				got, err := w.discard(cookies[name], reg(n).ID)
				g := m.regs[name]
				if g == nil {
					if !djinn.IsDefinite(err) || djinn.KindOf(err) != djinn.NoSuchObject {
						rt.Fatalf("step %d, %s: %v, want no such object", step, what, err)
					}
					break
				}
				want := g.discovered[n]
				if err != nil || got != want {
					rt.Fatalf("step %d, %s: %v %v, model says %v", step, what, got, err, want)
				}
				if want {
					delete(g.discovered, n)
					m.table[n].live = false
					m.prune()
					m.emit(name, []byte{n}, nil)
				}
			case 5, 6:
				ns := rapid.SliceOfNDistinct(rapid.IntRange(1, 4), 1, 3, rapid.ID[int]).Draw(rt, "found")
				var rs []string
				for _, i := range ns {
					n := byte(i)
					groups := rapid.SliceOfNDistinct(rapid.SampledFrom(mGroups), 0, 2, rapid.ID[string]).Draw(rt, "registrar-groups")
					slices.Sort(groups)
					rs = append(rs, fmt.Sprintf("r%d%q", n, groups))
					w.found(reg(n, groups...))
					m.table[n] = &mRegistrar{groups: groups, live: true}
					for _, name := range names {
						g := m.regs[name]
						if g == nil {
							continue
						}
						had, wants := g.discovered[n], m.interested(g, n)
						switch {
						case had && !wants:
							delete(g.discovered, n)
							m.emit(name, []byte{n}, nil)
						case !had && wants:
							g.discovered[n] = true
							m.emit(name, nil, []byte{n})
						}
					}
				}
				what = "found " + strings.Join(rs, " ")
			case 7:
				n := byte(rapid.IntRange(1, 4).Draw(rt, "lost"))
				what = fmt.Sprintf("lost r%d", n)
				w.lost(reg(n))
				if r := m.table[n]; r != nil {
					r.live = false
					for _, name := range names {
						if g := m.regs[name]; g != nil && g.discovered[n] && g.byGroup(r) {
							delete(g.discovered, n)
							m.emit(name, []byte{n}, nil)
						}
					}
					m.prune()
				}
			case 8:
				name, ok := drawReg()
				if !ok || m.regs[name] == nil {
					continue
				}
				what = "cancel " + name
				w.cancel(cookies[name])
				delete(m.regs, name)
				m.prune()
			case 9:
				what = "restart"
				w = restored(rt, w)
			case 10:
				n := byte(rapid.IntRange(1, 4).Draw(rt, "unwanted"))
				groups := rapid.SliceOfNDistinct(rapid.SampledFrom(mGroups), 0, 2, rapid.ID[string]).Draw(rt, "unwanted-groups")
				slices.Sort(groups)
				byGroup := rapid.Bool().Draw(rt, "group-discovery")
				what = fmt.Sprintf("no longer looked for r%d%q (group discovery %v)", n, groups, byGroup)
				w.unwanted(byGroup, reg(n, groups...))
				m.unwanted(names, n, groups, byGroup)
			}
			// The events and the state match the model's after every step.
			got := w.events()
			if !sameEvents(got, m.out) {
				rt.Fatalf("step %d, %s: events %q, model says %q", step, what, got, m.out)
			}
			m.out = nil
			for _, name := range names {
				g := m.regs[name]
				info, err := w.log.st.Registration(cookies[name])
				if g == nil {
					if djinn.KindOf(err) != djinn.NoSuchObject {
						rt.Fatalf("step %d, %s: ended registration %s: %+v %v", step, what, name, info, err)
					}
					continue
				}
				if err != nil || info.AllGroups != g.all || !slices.Equal(info.Groups, slices.Sorted(maps.Keys(g.groups))) || !slices.Equal(info.Locators, slices.Sorted(maps.Keys(g.locs))) {
					rt.Fatalf("step %d, %s: registration %s %+v %v, model says %+v", step, what, name, info, err, g)
				}
				var want []string
				for _, n := range slices.Sorted(maps.Keys(g.discovered)) {
					want = append(want, fmt.Sprintf("r%d", n))
				}
				if got := w.registrars(cookies[name]); !slices.Equal(got, want) {
					rt.Fatalf("step %d, %s: %s has %v, model says %v", step, what, name, got, want)
				}
			}
			var known, want []byte
			for _, r := range w.log.st.Known() {
				known = append(known, r.ID[1])
			}
			want = slices.Sorted(maps.Keys(m.table))
			if !slices.Equal(known, want) {
				rt.Fatalf("step %d, %s: table %v, model says %v", step, what, known, want)
			}
		}
	})
}

// unwanted is discovery dropping r<n> for lack of interest, with its groups
// as discovery knew them; byGroup: discovery looks for groups. A live one
// that some registration wants in a way discovery looks for is taken as
// found with those groups; any other is lost.
func (m *model) unwanted(names []string, n byte, groups []string, byGroup bool) {
	r := m.table[n]
	if r == nil || !r.live {
		return
	}
	r.groups = groups
	served := false
	for _, name := range names {
		if g := m.regs[name]; g != nil && (g.locs[loc(n)] || byGroup && g.byGroup(r)) {
			served = true
		}
	}
	r.live = served
	for _, name := range names {
		g := m.regs[name]
		if g == nil {
			continue
		}
		had, wants := g.discovered[n], m.interested(g, n)
		switch {
		case had && (!wants || !served && g.byGroup(r)):
			delete(g.discovered, n)
			m.emit(name, []byte{n}, nil)
		case !had && wants && served:
			g.discovered[n] = true
			m.emit(name, nil, []byte{n})
		}
	}
	m.prune()
}

// sameEvents compares events registration by registration, each in order:
// the order across registrations is the state's own (by cookie).
func sameEvents(got, want []string) bool {
	by := func(evs []string) map[string][]string {
		out := map[string][]string{}
		for _, e := range evs {
			name := e[:strings.IndexAny(e, "+-")]
			out[name] = append(out[name], e)
		}
		return out
	}
	return maps.EqualFunc(by(got), by(want), slices.Equal)
}
