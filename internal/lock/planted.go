//go:build !djinn_planted_fence

package lock

// plantedStaleFence is a bug the robustness suite plants to show that its
// fencing checker catches it (internal/robust; built only with the
// djinn_planted_fence tag). Without the tag it is false and compiled out.
const plantedStaleFence = false
