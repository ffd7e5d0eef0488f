//go:build !djinn_planted_lookup

package lookup

// plantedDropsItems is a bug the robustness suite plants to show that its
// lookup checker catches it (internal/robust; built only with the
// djinn_planted_lookup tag). Without the tag it is false and compiled out.
const plantedDropsItems = false
