// Package faulttest holds the hardening tests that need the built binaries
// rather than the in-process exporter: signals (SIGHUP reload, SIGTERM and
// SIGINT shutdown) against the real process, and the check that the
// Dockerfile's build stage matches `make build` and succeeds when its
// commands are run directly (with a module set it fetches itself), and
// that go.mod's go line is the oldest Go the dependencies allow. It has no
// non-test code.
package faulttest
