// Package version holds the nrigate version, set at build time.
package version

// Version is the nrigate version. The Makefile sets it with
// -ldflags "-X github.com/nrigate/nrigate/internal/version.Version=...".
var Version = "0.0.0-dev"
