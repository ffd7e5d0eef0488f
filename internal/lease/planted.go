//go:build !djinn_planted_lease

package lease

// plantedForgetsHorizons is a bug the robustness suite plants to show
// that its lease checker catches it (internal/robust; built only with the
// djinn_planted_lease tag). Without the tag it is false and compiled out.
const plantedForgetsHorizons = false
