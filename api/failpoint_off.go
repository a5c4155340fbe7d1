//go:build !failpoints

package api

// failpoint is a no-op outside crash-test builds.
func failpoint(string) {}
