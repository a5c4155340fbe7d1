package postgrestest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/postgres/pgxid"
)

// Cluster is a throwaway PostgreSQL cluster of one test, which the test may
// restart; the shared server is never restarted.
type Cluster struct {
	data, port, pgCtl, sock string
	asUser                  []string // runuser prefix when running as root
	log                     string
}

// PrivateCluster initialises and starts a cluster in a temporary directory
// (initdb and pg_ctl, as user postgres when run as root) and stops it when
// the test ends. It skips the test, saying why, only when the PostgreSQL
// server programs are not installed.
func PrivateCluster(t *testing.T) *Cluster {
	t.Helper()
	initdb, err1 := findPGBin("initdb")
	pgCtl, err2 := findPGBin("pg_ctl")
	if err1 != nil || err2 != nil {
		t.Skipf("a private cluster needs initdb and pg_ctl (PostgreSQL server packages), not found: %v %v", err1, err2)
	}
	dir, err := os.MkdirTemp("", "payments-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	c := &Cluster{data: filepath.Join(dir, "data"), port: port, pgCtl: pgCtl, sock: dir, log: filepath.Join(dir, "postgres.log")}
	if os.Geteuid() == 0 {
		// initdb and postgres refuse to run as root.
		c.asUser = []string{"runuser", "-u", "postgres", "--"}
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.run(initdb, "-D", c.data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		t.Fatalf("initdb: %v", err)
	}
	c.start(t)
	t.Cleanup(func() { _ = c.run(c.pgCtl, "-D", c.data, "-m", "immediate", "-w", "stop") })
	return c
}

func (c *Cluster) start(t *testing.T) {
	t.Helper()
	if err := c.run(c.pgCtl, "-D", c.data, "-l", c.log, "-w", "-t", "60", "-o", c.opts(), "start"); err != nil {
		t.Fatalf("pg_ctl start: %v", err)
	}
}

func (c *Cluster) opts() string {
	return fmt.Sprintf("-p %s -k %s -c listen_addresses=127.0.0.1 -c max_connections=30", c.port, c.sock)
}

// MoveXid moves the cluster's next transaction id (xid8) forward to next
// (pgxid.Cluster.MoveTo). Sessions open on the cluster are cut.
func (c *Cluster) MoveXid(t *testing.T, next uint64) {
	t.Helper()
	resetwal, err := findPGBin("pg_resetwal")
	if err != nil {
		t.Fatal(err)
	}
	px := pgxid.Cluster{URL: c.URL(), DataDir: c.data, PgResetwal: resetwal, Run: c.run,
		Stop: func() error { return c.run(c.pgCtl, "-D", c.data, "-m", "fast", "-w", "-t", "60", "stop") },
		Start: func() error {
			return c.run(c.pgCtl, "-D", c.data, "-l", c.log, "-w", "-t", "60", "-o", c.opts(), "start")
		},
	}
	if err := px.MoveTo(context.Background(), next); err != nil {
		t.Fatal(err)
	}
}

// URL is the cluster's postgres database.
func (c *Cluster) URL() string {
	return "postgres://postgres@127.0.0.1:" + c.port + "/postgres?sslmode=disable"
}

// Restart is a crash and recovery: immediate shutdown, no checkpoint, and
// start again. Every open session is cut.
func (c *Cluster) Restart(t *testing.T) {
	t.Helper()
	if err := c.run(c.pgCtl, "-D", c.data, "-l", c.log, "-m", "immediate", "-w", "-t", "60", "restart"); err != nil {
		t.Fatalf("pg_ctl restart: %v", err)
	}
}

func (c *Cluster) run(bin string, args ...string) error {
	all := append(append(append([]string{}, c.asUser...), bin), args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, all[0], all[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	// The server logs to its file; should a child keep the pipes open
	// anyway, do not wait on them.
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: %s", err, out.Bytes())
	}
	return nil
}

func findPGBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) > 0 {
		return matches[len(matches)-1], nil
	}
	return "", fmt.Errorf("%s not found", name)
}
