//go:build djinn_planted_txn

package kv

// plantedOneWriteUnchanged: a transaction that wrote a single key here
// votes NOTCHANGED, so its write is never rolled forward while the other
// participants commit theirs. A planted bug for the robustness suite;
// never in a release.
const plantedOneWriteUnchanged = true
