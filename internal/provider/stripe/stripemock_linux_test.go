package stripe

import (
	"os/exec"
	"syscall"
)

// dieWithParent stops stripe-mock even when the test binary is killed (for
// example on -timeout) before TestMain can clean up.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
