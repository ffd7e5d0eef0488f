//go:build djinn_planted_renewal

package renewal

// plantedSkipsRenewals: a client lease whose cookie's first byte is a
// multiple of 4 is never renewed, though it stays in its set — it expires
// early, and no failure event is raised. A planted bug for the robustness
// suite; never in a release.
const plantedSkipsRenewals = true
