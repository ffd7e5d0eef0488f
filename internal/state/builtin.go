package state

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/statepb"
)

// The machine's own parts: the cluster's identity and members, and the
// lease table.

func (m *Machine) clusterPart() Part {
	return Part{
		Name: "cluster",
		Commands: []Command{
			On(func(_ int64, c *statepb.Init) any {
				return Result(m.applyInit(c, fmt.Sprintf("log entry %d", m.applying)))
			}),
			On(func(_ int64, c *statepb.Member) any { m.setMember(c); return nil }),
			On(func(_ int64, c *statepb.RulesRaise) any { return m.applyRaise(m.applying, c) }),
		},
		Records: []Record{
			Restores(func(r *statepb.Init) error { _, err := m.applyInit(r, "snapshot"); return err }),
			Restores(func(r *statepb.Member) error { m.setMember(r); return nil }),
		},
		Snapshot: m.clusterRecords,
		Reset: func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.service = djinn.ID{}
			m.previous = nil
			m.members = map[string]MemberInfo{}
			m.rules.Store(0)
		},
	}
}

// applyInit sets the cluster's service id, and those it was restored
// from, and its rules version, once: a second Init (two first leaders
// racing) keeps the first. A rules version above the machine's maximum
// stops it (where says where the Init was met).
func (m *Machine) applyInit(c *statepb.Init, where string) (djinn.ID, error) {
	id, err := djinn.IDFromBytes("service id", c.GetServiceId())
	if err != nil {
		return djinn.ID{}, err
	}
	previous := make([]djinn.ID, len(c.GetPreviousIds()))
	for i, b := range c.GetPreviousIds() {
		if previous[i], err = djinn.IDFromBytes("previous service id", b); err != nil {
			return djinn.ID{}, err
		}
	}
	if m.ServiceID().IsZero() {
		if err := m.setRules(c.GetRulesVersion(), where); err != nil {
			m.stop(err.(*RulesError))
			return djinn.ID{}, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.service.IsZero() {
		m.service, m.previous = id, previous
		select {
		case <-m.known:
		default:
			close(m.known)
		}
	}
	return m.service, nil
}

// setMember records or forgets a member.
func (m *Machine) setMember(c *statepb.Member) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.GetRemoved() {
		delete(m.members, c.GetNodeId())
		return
	}
	m.members[c.GetNodeId()] = MemberInfo{Endpoint: c.GetGrpcAddress(), Voter: c.GetVoter(), RulesMax: c.GetRulesMax()}
}

func (m *Machine) clusterRecords() (Dump, error) {
	var recs []*statepb.Member
	m.mu.Lock()
	initRec := &statepb.Init{ServiceId: m.service[:], RulesVersion: m.rules.Load()}
	for _, id := range m.previous {
		initRec.PreviousIds = append(initRec.PreviousIds, id[:])
	}
	service := m.service
	for node, info := range m.members {
		recs = append(recs, &statepb.Member{NodeId: node, GrpcAddress: info.Endpoint, Voter: info.Voter, RulesMax: info.RulesMax})
	}
	m.mu.Unlock()
	return func(emit func(proto.Message) error) error {
		if !service.IsZero() {
			if err := emit(initRec); err != nil {
				return err
			}
		}
		for _, r := range recs {
			if err := emit(r); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

func (m *Machine) leasePart() Part {
	t := m.Leases
	return Part{
		Name: "leases",
		Commands: []Command{
			On(func(_ int64, c *statepb.LeaseCancel) any {
				errs, ended := t.ApplyCancel(c.GetCookies())
				m.leasesEnded(ended)
				return errs
			}),
			On(func(_ int64, c *statepb.LeaseExpire) any {
				m.leasesEnded(t.ApplyExpire(c.GetCookies()))
				return nil
			}),
			On(func(_ int64, c *statepb.LeaseHorizon) any { t.ApplyHorizon(c.GetEntries()); return nil }),
			On(func(_ int64, c *statepb.Quotas) any { t.Quotas().ApplyLimits(c); return nil }),
		},
		Records: []Record{
			Restores(t.Restore),
			Restores(func(r *statepb.Quotas) error { t.Quotas().ApplyLimits(r); return nil }),
		},
		View: func() (Dump, func()) {
			v := t.View()
			limits := t.Quotas().Limits()
			return func(emit func(proto.Message) error) error {
				if len(limits) > 0 {
					if err := emit(limits.Proto()); err != nil {
						return err
					}
				}
				return v.Each(func(r *statepb.LeaseRecord) error { return emit(r) })
			}, v.Release
		},
		Reset: t.Reset,
	}
}
