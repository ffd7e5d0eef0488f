package kv

// Visited returns how many keys of the index listings have visited.
func (d *DB) Visited() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.visited
}
