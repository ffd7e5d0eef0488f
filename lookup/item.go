package lookup

import (
	"bytes"
	"slices"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	core "github.com/djinn-go/djinn/internal/lookup"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// cloneItem returns a copy of it that shares no slice with it.
func cloneItem(it client.ServiceItem) client.ServiceItem {
	it.Service = slices.Clone(it.Service)
	it.Types = slices.Clone(it.Types)
	it.Entries = cloneEntries(it.Entries)
	return it
}

func cloneEntries(es []client.Entry) []client.Entry {
	out := slices.Clone(es)
	for i := range out {
		out[i].Supertypes = slices.Clone(out[i].Supertypes)
		out[i].Fields = slices.Clone(out[i].Fields)
	}
	return out
}

// itemsEqual reports whether two items are the same in every part. Items
// are compared in the canonical form registrars return them in (and the
// JoinManager holds them in), where equal items are equal field by field.
func itemsEqual(a, b client.ServiceItem) bool {
	return sameService(a, b) && slices.EqualFunc(a.Entries, b.Entries, entryEqual)
}

// sameService reports whether two items differ at most in their entries.
func sameService(a, b client.ServiceItem) bool {
	return a.ID == b.ID && bytes.Equal(a.Service, b.Service) && slices.Equal(a.Types, b.Types)
}

func entryEqual(a, b client.Entry) bool {
	return a.Type == b.Type && slices.Equal(a.Supertypes, b.Supertypes) && slices.Equal(a.Fields, b.Fields)
}

// change returns the item an attribute call would leave at a registrar,
// computed by the registrar's own code (package internal/lookup): it is
// registered in a private registry of one and changed there. A nil op only
// puts the item into canonical form (types sorted, duplicate entries
// dropped, fields sorted by name). Bad arguments get the registrar's
// errors, naming the bad value. it must have a service id.
func change(it client.ServiceItem, op func(r *core.Registry, id djinn.ID) error) (client.ServiceItem, error) {
	ci, err := core.ItemFromProto(it.Proto())
	if err != nil {
		return client.ServiceItem{}, err
	}
	r, err := core.New(djinn.NewID(), core.Limits{})
	if err != nil {
		return client.ServiceItem{}, err
	}
	if _, err := r.Register(ci, djinn.NewID()); err != nil {
		return client.ServiceItem{}, err
	}
	if op != nil {
		if err := op(r, ci.ID); err != nil {
			return client.ServiceItem{}, err
		}
	}
	reg, err := r.Get(ci.ID)
	if err != nil {
		return client.ServiceItem{}, err
	}
	return client.ServiceItemFromProto(core.ItemToProto(reg.Item))
}

func coreEntries(es []client.Entry) []core.Entry {
	pbs := make([]*djinnpb.Entry, len(es))
	for i, e := range es {
		pbs[i] = e.Proto()
	}
	return core.EntriesFromProto(pbs)
}

func coreTemplates(ts []client.EntryTemplate) []core.EntryTemplate {
	pbs := make([]*djinnpb.EntryTemplate, len(ts))
	for i, t := range ts {
		pbs[i] = t.Proto()
	}
	return core.EntryTemplatesFromProto(pbs)
}

// checkTemplate refuses a template a lookup service would refuse, with the
// lookup service's own checks.
func checkTemplate(t client.ServiceTemplate) error {
	ct, err := core.TemplateFromProto(t.Proto())
	if err != nil {
		return err
	}
	r, err := core.New(djinn.NewID(), core.Limits{})
	if err != nil {
		return err
	}
	_, _, err = r.Lookup(ct, 0)
	return err
}

// cloneTemplate returns a copy of t that shares nothing with it.
func cloneTemplate(t client.ServiceTemplate) client.ServiceTemplate {
	if t.ID != nil {
		id := *t.ID
		t.ID = &id
	}
	t.Types = slices.Clone(t.Types)
	t.Entries = slices.Clone(t.Entries)
	for i := range t.Entries {
		t.Entries[i].Fields = slices.Clone(t.Entries[i].Fields)
	}
	return t
}
