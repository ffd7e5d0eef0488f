package participant

import "os"

// Grow sets how the store makes its log larger, in place of fallocate, so
// that a test can make it fail as a full disk does.
func Grow(grow func(f *os.File, size, to int64) error) FileStoreOption {
	return func(s *FileStore) { s.grow = grow }
}

// BreakFile closes the store's file under it, so that its next write
// fails as a full or failing disk makes it fail.
func BreakFile(s *FileStore) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.f.Close()
}

// LogEnd returns where the store's frames end in its log.
func LogEnd(s *FileStore) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.end
}

// V1Log returns a version 1 log (written before extents and numbered
// batches) with crash count count and one batch frame per op.
func V1Log(count int64, ops ...Op) []byte {
	log := appendFrame(nil, append([]byte{frameHeader}, storeMagicV1...))
	log = append(log, countFrame(count)...)
	for _, op := range ops {
		log = append(log, appendFrame(nil, encodeBatch([]Op{op}))...)
	}
	return log
}
