package postgrestest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PoolerEnv names the environment variable that runs the HTTP tests through
// a pooler: TEST_POOLER=pgbouncer puts a PgBouncer in transaction mode
// between every service instance and its database.
const PoolerEnv = "TEST_POOLER"

// PooledTimeouts are the session timeouts tests set on a pooled service,
// as production does: PgBouncer drops them at connection start, and every
// transaction sets them again.
var PooledTimeouts = [3]time.Duration{5 * time.Second, 2 * time.Second, 10 * time.Second}

// PoolerIgnoredParameters is what PgBouncer must be told to drop from the
// startup packet: the session timeouts the service sends (README,
// "Production database").
const PoolerIgnoredParameters = "statement_timeout,lock_timeout,idle_in_transaction_session_timeout"

// Pooled reports whether TEST_POOLER asks for a pooler.
func Pooled(t testing.TB) bool {
	switch v := os.Getenv(PoolerEnv); v {
	case "":
		return false
	case "pgbouncer":
		return true
	default:
		t.Fatalf("%s=%q: the only pooler is pgbouncer", PoolerEnv, v)
		return false
	}
}

// PgBouncer starts a PgBouncer in transaction mode in front of the server
// of direct (a URL as URL returns) and returns direct's database through
// it, with the query execution mode a pooler without protocol-level
// prepared statements needs. It runs as the postgres user from a temporary
// folder and stops when t ends. PgBouncer is installed with apt-get when
// missing, as scripts/pg.sh installs PostgreSQL.
func PgBouncer(t testing.TB, direct string) string {
	t.Helper()
	return PgBouncerIgnoring(t, direct, PoolerIgnoredParameters)
}

// PgBouncerIgnoring is PgBouncer with ignore_startup_parameters set to
// ignored (comma separated; "" ignores none).
func PgBouncerIgnoring(t testing.TB, direct, ignored string) string {
	t.Helper()
	bin, err := pgbouncerBin()
	if err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	dir, err := os.MkdirTemp("", "pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = 8
max_client_conn = 1000
ignore_startup_parameters = %s
server_check_delay = 0
logfile = %s
`, u.Hostname(), u.Port(), port, filepath.Join(dir, "users.txt"), ignored, filepath.Join(dir, "pgbouncer.log"))
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o644); err != nil {
		t.Fatal(err)
	}
	users := fmt.Sprintf("%q \"\"\n", u.User.Username())
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(users), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.Dir = dir
	// PgBouncer refuses to run as root.
	if os.Geteuid() == 0 {
		cred, err := postgresUser()
		if err != nil {
			t.Fatalf("pgbouncer: %v", err)
		}
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT) // SIGINT: shut down now
		<-exited
	})

	pooled := *u
	pooled.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	q := pooled.Query()
	q.Set("default_query_exec_mode", "cache_describe")
	pooled.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, pooled.String())
		if err == nil {
			conn.Close(ctx)
			return pooled.String()
		}
		select {
		case werr := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			t.Fatalf("pgbouncer exited (%v):\n%s", werr, log)
		case <-ctx.Done():
			t.Fatalf("pgbouncer does not answer on port %d: %v", port, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func pgbouncerBin() (string, error) {
	for _, p := range []string{"pgbouncer", "/usr/sbin/pgbouncer"} {
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
	}
	if os.Geteuid() != 0 {
		return "", errors.New("not installed, and only root can apt-get install -y pgbouncer")
	}
	out, err := exec.Command("sh", "-c", "apt-get install -y -qq pgbouncer || { apt-get update -qq && apt-get install -y -qq pgbouncer; }").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("apt-get install -y pgbouncer: %v\n%s", err, out)
	}
	return exec.LookPath("/usr/sbin/pgbouncer")
}

func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("user postgres: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// freePort is a port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// WithoutExecMode is url without a default_query_exec_mode: the service's
// default, cache_statement.
func WithoutExecMode(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	q.Del("default_query_exec_mode")
	u.RawQuery = q.Encode()
	return strings.TrimSuffix(u.String(), "?")
}
