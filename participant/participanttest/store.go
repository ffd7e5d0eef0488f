package participanttest

import (
	"context"
	"sync"

	"github.com/djinn-go/djinn/participant"
)

// FaultyStore is a participant.Store over another whose writes can be made
// to fail, as a full or broken disk's would.
type FaultyStore struct {
	participant.Store

	mu   sync.Mutex
	fail error // guarded by mu
}

var _ participant.Store = (*FaultyStore)(nil)

// NewFaultyStore wraps st.
func NewFaultyStore(st participant.Store) *FaultyStore { return &FaultyStore{Store: st} }

// FailWrites makes every later Apply fail with err, writing nothing (nil:
// write again).
func (s *FaultyStore) FailWrites(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

// Apply implements participant.Store.
func (s *FaultyStore) Apply(ctx context.Context, b *participant.Batch) error {
	s.mu.Lock()
	err := s.fail
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.Store.Apply(ctx, b)
}
