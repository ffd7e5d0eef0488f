//go:build !djinn_planted_txn

package kv

// plantedOneWriteUnchanged is a bug the robustness suite plants to show
// that its transaction checker catches it (internal/robust; built only
// with the djinn_planted_txn tag). Without the tag it is false and
// compiled out.
const plantedOneWriteUnchanged = false
