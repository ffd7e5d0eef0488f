// Package lint holds the repository's rules as tests: service cores do not
// import gRPC, deterministic state machines (every package that gives the
// state machine a part) do not read the clock, tests that sleep do so only
// on synctest's fake clock, and the code keeps its shape — no hand-written
// file over 800 lines, and under 5 % of each package's functions over 60
// lines.
package lint
