package participant

// BreakFile closes the store's file under it, so that its next write
// fails as a full or failing disk makes it fail.
func BreakFile(s *FileStore) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.f.Close()
}
