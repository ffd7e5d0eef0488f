// Package lint holds the repository's rules as tests: service cores do not
// import gRPC, deterministic state machines do not read the clock, and tests
// that sleep do so only on synctest's fake clock.
package lint
