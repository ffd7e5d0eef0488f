//go:build !djinn_planted_mailbox

package mailbox

// plantedDropsEvents is a bug the robustness suite plants to show that its
// mailbox checker catches it (internal/robust; built only with the
// djinn_planted_mailbox tag). Without the tag it is false and compiled out.
const plantedDropsEvents = false
