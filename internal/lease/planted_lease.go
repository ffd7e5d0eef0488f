//go:build djinn_planted_lease

package lease

// plantedForgetsHorizons: a new leader keeps each lease's expiration as
// logged at its grant, forgetting the horizon that covers the renewals the
// old leader granted in memory — so renewed leases expire early after a
// failover. A planted bug for the robustness suite; never in a release.
const plantedForgetsHorizons = true
