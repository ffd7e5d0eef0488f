//go:build djinn_planted_fence

package lock

// plantedStaleFence: a grant of a write lock with no other holder reuses
// the set's last fencing token instead of a new one, so a holder that lost
// its lock still passes a fenced resource's check. A planted bug for the
// robustness suite; never in a release.
const plantedStaleFence = true
