package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Formation is a pg_auto_failover formation on this machine (monitor,
// primary, secondary) started by scripts/topology.sh in a temporary
// folder, as the postgres user when run as root.
type Formation struct {
	// URL is the multi-host DATABASE_URL of its postgres database, with
	// target_session_attrs=read-write.
	URL    string
	script string
	dir    string
}

// StartFormation starts a formation on three free consecutive ports.
// Stop it with Stop.
func StartFormation(ctx context.Context) (*Formation, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	port, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "formation-")
	if err != nil {
		return nil, err
	}
	// The postgres user must reach it.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	f := &Formation{script: filepath.Join(root, "scripts", "topology.sh"), dir: dir}
	out, err := f.run(ctx, "formation", strconv.Itoa(port))
	if err != nil {
		f.Stop()
		return nil, err
	}
	f.URL = strings.TrimSpace(out)
	return f, nil
}

// Failover stops the primary (immediate shutdown), calls stopped once it
// is down, and returns once the secondary accepts writes.
func (f *Formation) Failover(ctx context.Context, stopped func()) error {
	if _, err := f.run(ctx, "stop-primary"); err != nil {
		return err
	}
	stopped()
	_, err := f.run(ctx, "wait-primary")
	return err
}

// Stop stops every server of the formation and removes its folder.
func (f *Formation) Stop() {
	_, _ = f.run(context.Background(), "stop")
	os.RemoveAll(f.dir)
}

func (f *Formation) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, f.script, append([]string{args[0], f.dir}, args[1:]...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("scripts/topology.sh %s: %w\n%s", args[0], err, stderr.String())
	}
	return stdout.String(), nil
}

// freePorts finds n consecutive free ports and returns the first.
func freePorts(n int) (int, error) {
	for range 50 {
		addr, err := freeAddr()
		if err != nil {
			return 0, err
		}
		_, p, _ := net.SplitHostPort(addr)
		first, _ := strconv.Atoi(p)
		if first+n > 65535 {
			continue
		}
		ok := true
		for i := 1; i < n && ok; i++ {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(first+i)))
			if err != nil {
				ok = false
				continue
			}
			ln.Close()
		}
		if ok {
			return first, nil
		}
	}
	return 0, errors.New("chaos: no free consecutive ports")
}
