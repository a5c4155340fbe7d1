package pgfault_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/postgres/pgfault"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
	"github.com/jackc/pgx/v5"
)

// setup gives a fresh database, a proxy in front of its server, a direct
// connection and a connection through the proxy, with a table t.
func setup(t *testing.T) (p *pgfault.Proxy, direct *pgx.Conn, proxied func() *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	dbURL := postgrestest.URL(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	p, err = pgfault.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	direct, err = pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close(ctx) })
	if _, err := direct.Exec(ctx, "CREATE TABLE t (v text)"); err != nil {
		t.Fatal(err)
	}
	return p, direct, func() *pgx.Conn {
		c, err := pgx.Connect(ctx, p.URL(dbURL))
		if err != nil {
			t.Fatalf("connect through the proxy: %v", err)
		}
		t.Cleanup(func() { c.Close(ctx) })
		return c
	}
}

func count(t *testing.T, c *pgx.Conn, v string) int {
	t.Helper()
	var n int
	if err := c.QueryRow(context.Background(), "SELECT count(*) FROM t WHERE v = $1", v).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func insertTx(ctx context.Context, c *pgx.Conn, v string) error {
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "INSERT INTO t (v) VALUES ($1) -- marker", v); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func TestDropCommitAnswer(t *testing.T) {
	t.Parallel()
	p, direct, proxied := setup(t)
	ctx := context.Background()
	c := proxied()
	armed := p.DropCommitAnswer("-- marker", 2)
	if err := insertTx(ctx, c, "first"); err != nil {
		t.Fatalf("the first matching commit: %v; only the second is to be lost", err)
	}
	if _, err := c.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	err := insertTx(ctx, c, "second")
	if err == nil {
		t.Fatalf("the client got the answer of a COMMIT whose answer was to be lost")
	}
	select {
	case <-armed.Fired():
	default:
		t.Fatalf("the fault did not fire, yet the commit failed: %v", err)
	}
	if n := count(t, direct, "second"); n != 1 {
		t.Fatalf("rows committed = %d, want 1: the commit happened, only its answer was lost", n)
	}
	if s := p.Stats(); s.CommitsDropped != 1 || s.Commits < 2 {
		t.Fatalf("stats = %+v", s)
	}
	if n := count(t, proxied(), "second"); n != 1 {
		t.Fatalf("a new connection through the proxy sees %d rows", n)
	}
}

func TestResetInTransaction(t *testing.T) {
	t.Parallel()
	p, direct, proxied := setup(t)
	ctx := context.Background()
	armed := p.ResetOnStatement("-- marker", 1)
	if err := insertTx(ctx, proxied(), "lost"); err == nil {
		t.Fatalf("a transaction reset in its middle committed")
	}
	<-armed.Fired()
	if n := count(t, direct, "lost"); n != 0 {
		t.Fatalf("rows = %d, want 0: the server rolls back a broken transaction", n)
	}
	if err := insertTx(ctx, proxied(), "kept"); err != nil {
		t.Fatalf("after the reset: %v", err)
	}
}

func TestResetAfterBytes(t *testing.T) {
	t.Parallel()
	p, _, proxied := setup(t)
	ctx := context.Background()
	c := proxied()
	p.ResetAfterBytes(10)
	if _, err := c.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatalf("a query passed a connection reset after 10 bytes")
	}
	p.Clear()
	if _, err := proxied().Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("after Clear: %v", err)
	}
}

func TestResetAllBreaksIdleConnections(t *testing.T) {
	t.Parallel()
	p, _, proxied := setup(t)
	ctx := context.Background()
	c := proxied()
	p.ResetAll()
	if _, err := c.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatalf("an idle connection reset by the proxy still answered")
	}
	if _, err := proxied().Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("a new connection: %v", err)
	}
}

// A stall and a blackhole hold a query past its deadline; after them the
// stalled connection goes on, the blackholed one is closed.
func TestStallAndBlackhole(t *testing.T) {
	t.Parallel()
	p, _, proxied := setup(t)
	ctx := context.Background()
	for _, fault := range []struct {
		name  string
		start func()
	}{
		{"stall", func() { p.Stall(time.Hour) }},
		{"blackhole", func() { p.Blackhole(time.Hour) }},
	} {
		c := proxied()
		fault.start()
		qctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := c.Exec(qctx, "SELECT 1")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: a query answered (%v)", fault.name, err)
		}
		p.Clear()
		if _, err := proxied().Exec(ctx, "SELECT 1"); err != nil {
			t.Fatalf("after the %s: %v", fault.name, err)
		}
	}
}

func TestSlowStillAnswers(t *testing.T) {
	t.Parallel()
	p, direct, proxied := setup(t)
	ctx := context.Background()
	c := proxied()
	p.Slow(5*time.Millisecond, time.Hour)
	if err := insertTx(ctx, c, "slow"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, direct, "slow"); n != 1 {
		t.Fatalf("rows = %d", n)
	}
}
