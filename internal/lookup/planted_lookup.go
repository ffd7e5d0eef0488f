//go:build djinn_planted_lookup

package lookup

// plantedDropsItems: a lookup by service id whose first byte is a
// multiple of 4 finds nothing, though the item is registered. A planted
// bug for the robustness suite; never in a release.
const plantedDropsItems = true
