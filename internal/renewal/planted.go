//go:build !djinn_planted_renewal

package renewal

// plantedSkipsRenewals is a bug the robustness suite plants to show that
// its renewal checker catches it (internal/robust; built only with the
// djinn_planted_renewal tag). Without the tag it is false and compiled out.
const plantedSkipsRenewals = false
