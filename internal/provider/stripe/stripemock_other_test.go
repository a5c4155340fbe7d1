//go:build !linux

package stripe

import "os/exec"

// dieWithParent is best effort: only Linux can tie a child's life to ours.
func dieWithParent(*exec.Cmd) {}
