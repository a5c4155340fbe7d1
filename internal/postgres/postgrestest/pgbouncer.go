package postgrestest

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
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
// as production does; every transaction, and every statement sent outside
// one, sets them itself.
var PooledTimeouts = [3]time.Duration{5 * time.Second, 2 * time.Second, 10 * time.Second}

// DebianIni is pgbouncer.ini as Debian 12's pgbouncer 1.18 package ships
// it (/etc/pgbouncer/pgbouncer.ini). The service must work behind it with
// only pool_mode and the lines that reach the server changed.
//
//go:embed debian-pgbouncer.ini
var DebianIni string

// PoolerPassword is the password PgBouncer asks pooled clients for:
// Debian's auth_type = md5 stays, with a userlist of one user.
const PoolerPassword = "pooled"

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

// DebianPgBouncerIni is DebianIni with pool_mode = transaction, every
// database on server (host:port), listening on 127.0.0.1:port, its files
// (log, pid, users) in dir and no Unix socket. Nothing else changes:
// startup parameters, max_client_conn (100), default_pool_size (20) and
// the rest keep Debian's defaults.
func DebianPgBouncerIni(serverHost, serverPort string, port int, dir string) string {
	set := map[string]string{
		"logfile":         filepath.Join(dir, "pgbouncer.log"),
		"pidfile":         filepath.Join(dir, "pgbouncer.pid"),
		"listen_addr":     "127.0.0.1",
		"listen_port":     strconv.Itoa(port),
		"unix_socket_dir": "",
		"auth_file":       filepath.Join(dir, "userlist.txt"),
		"pool_mode":       "transaction",
	}
	var out []string
	for _, line := range strings.Split(DebianIni, "\n") {
		key, _, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if v, isSet := set[key]; ok && isSet {
			line = key + " = " + v
			delete(set, key)
		}
		out = append(out, line)
		if line == "[databases]" {
			out = append(out, fmt.Sprintf("* = host=%s port=%s", serverHost, serverPort))
		}
	}
	// What Debian leaves commented out, at the end of [pgbouncer], its
	// last section.
	for _, key := range slices.Sorted(maps.Keys(set)) {
		out = append(out, key+" = "+set[key])
	}
	return strings.Join(out, "\n") + "\n"
}

// PgBouncer starts a PgBouncer 1.18 in front of the server of direct (a URL
// as URL returns), configured with Debian's pgbouncer.ini changed only by
// DebianPgBouncerIni, and returns direct's database through it, with the
// password PgBouncer asks for and the query execution mode a pooler
// without protocol-level prepared statements needs. It runs as the
// postgres user from a temporary folder and stops when t ends. PgBouncer
// is installed with apt-get when missing, as scripts/pg.sh installs
// PostgreSQL.
func PgBouncer(t testing.TB, direct string) string {
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
	ini := DebianPgBouncerIni(u.Hostname(), u.Port(), port, dir)
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o644); err != nil {
		t.Fatal(err)
	}
	users := fmt.Sprintf("%q %q\n", u.User.Username(), PoolerPassword)
	if err := os.WriteFile(filepath.Join(dir, "userlist.txt"), []byte(users), 0o644); err != nil {
		t.Fatal(err)
	}
	exited := startPgBouncer(t, bin, dir)
	pooled := *u
	pooled.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	pooled.User = url.UserPassword(u.User.Username(), PoolerPassword)
	q := pooled.Query()
	q.Set("default_query_exec_mode", "cache_describe")
	pooled.RawQuery = q.Encode()
	waitPgBouncer(t, pooled.String(), dir, exited)
	return pooled.String()
}

// startPgBouncer runs bin on dir's pgbouncer.ini until t ends.
func startPgBouncer(t testing.TB, bin, dir string) <-chan error {
	t.Helper()
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
	return exited
}

// waitPgBouncer waits until pooled answers.
func waitPgBouncer(t testing.TB, pooled, dir string, exited <-chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, pooled)
		if err == nil {
			conn.Close(ctx)
			return
		}
		select {
		case werr := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			t.Fatalf("pgbouncer exited (%v):\n%s", werr, log)
		case <-ctx.Done():
			t.Fatalf("pgbouncer does not answer at %s: %v", dir, err)
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
