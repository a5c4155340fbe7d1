package scripts

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
	"github.com/jackc/pgx/v5"
)

// The local PgBouncer of docs/operating.md: topology.sh pgbouncer prints a URL that
// reaches the server through PgBouncer in transaction mode, and stop ends
// it.
func TestTopologyPgBouncer(t *testing.T) {
	t.Parallel()
	server := os.Getenv("TEST_DATABASE_URL")
	if server == "" {
		server = postgrestest.DefaultURL
	}
	// Not t.TempDir: PgBouncer runs as postgres, which must enter it.
	parent, err := os.MkdirTemp("", "topology-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "pgb")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	env := append(os.Environ(), "LC_ALL=C")
	code, stdout, stderr := bash(t, env, `exec ./topology.sh pgbouncer "$1" "$2" "$3"`, dir, strconv.Itoa(port), server)
	t.Cleanup(func() { bash(t, env, `exec ./topology.sh stop "$1"`, dir) })
	if code != 0 {
		t.Fatalf("topology.sh pgbouncer: exit %d\n%s", code, stderr)
	}
	pooled := strings.TrimSpace(stdout)
	if !strings.Contains(pooled, ":"+strconv.Itoa(port)+"/") || !strings.Contains(pooled, "default_query_exec_mode=cache_describe") {
		t.Fatalf("printed %q", pooled)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pooled)
	if err != nil {
		t.Fatal(err)
	}
	// The server answers, and PgBouncer keeps Debian's defaults: a
	// startup statement_timeout is refused, and the service, which sends
	// none, works.
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	ini, err := os.ReadFile(filepath.Join(dir, "pgbouncer.ini"))
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`(?m)^ignore_startup_parameters`).Match(ini) || !regexp.MustCompile(`(?m)^pool_mode = transaction$`).Match(ini) {
		t.Errorf("pgbouncer.ini is not Debian's with pool_mode = transaction:\n%s", ini)
	}
	cfg, err := pgx.ParseConfig(pooled)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["statement_timeout"] = "5000"
	if conn, err := pgx.ConnectConfig(ctx, cfg); err == nil {
		conn.Close(ctx)
		t.Error("a startup statement_timeout was accepted: not PgBouncer's default settings")
	}
	db, err := postgres.Open(ctx, pooled, postgres.WithSessionTimeouts(5*time.Second, 2*time.Second, 10*time.Second))
	if err != nil {
		t.Fatalf("the service's pool through PgBouncer: %v", err)
	}
	if err := db.Ready(ctx); err != nil && !strings.Contains(err.Error(), "migrations pending") {
		t.Errorf("ready through PgBouncer: %v", err)
	}
	db.Close()

	if code, _, stderr := bash(t, env, `exec ./topology.sh stop "$1"`, dir); code != 0 {
		t.Fatalf("topology.sh stop: exit %d\n%s", code, stderr)
	}
	if c, err := pgx.Connect(ctx, pooled); err == nil {
		c.Close(ctx)
		t.Fatal("PgBouncer still answers after stop")
	}
}
