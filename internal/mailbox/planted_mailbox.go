//go:build djinn_planted_mailbox

package mailbox

// plantedDropsEvents: every event whose sequence number is a multiple of
// 50 is acknowledged but stored nowhere. A planted bug for the robustness
// suite; never in a release.
const plantedDropsEvents = true
