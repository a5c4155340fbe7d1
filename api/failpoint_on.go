//go:build failpoints

package api

import (
	"os"
	"syscall"
)

// failpoint kills the process at a named point when PAYMENTS_FAILPOINT names
// it. Only crash-test builds (-tags failpoints) contain it.
func failpoint(name string) {
	if os.Getenv("PAYMENTS_FAILPOINT") == name {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}
