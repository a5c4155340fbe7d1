package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// A primary demoted under the pool (as a failover does: it comes back as a
// standby and refuses writes): readiness says so, a write fails as
// unavailable (503, retried with the same key), the pool drops its
// connections to it, and the metrics count it.
func TestDemotedPrimary(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, b := setup(t, nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(b.db.Collector())
	lock := func() error {
		return store.WithTx(ctx, func(tx payment.Tx) error {
			_, err := tx.PaymentGetByIDForUpdate(ctx, b.payment.AccountID, b.payment.ID)
			return err
		})
	}
	if err := lock(); err != nil {
		t.Fatal(err)
	}
	if err := b.db.Ready(ctx); err != nil {
		t.Fatalf("ready on a primary: %v", err)
	}
	if got := gauge(t, reg, "payments_db_seconds_since_last_write"); got < 0 || got > 30 {
		t.Errorf("seconds since last write = %v after a commit", got)
	}

	// Demote: every new transaction of the database is read-only, and
	// the pool's connections are ended, as a restart into a standby does.
	name := b.db.Pool.Config().ConnConfig.Database
	if _, err := b.admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s SET default_transaction_read_only = on", pgx.Identifier{name}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	// An idle connection opened before the demotion still writes; the
	// ones after it do not. Reset stands for the restart.
	b.db.Pool.Reset()
	if err := b.db.Ready(ctx); !errors.Is(err, postgres.ErrReadOnly) {
		t.Fatalf("ready on a demoted primary: %v, want ErrReadOnly", err)
	}
	newConns := b.db.Pool.Stat().NewConnsCount()
	err := lock()
	if !errors.Is(err, postgres.ErrUnavailable) {
		t.Fatalf("write on a demoted primary: %v, want ErrUnavailable", err)
	}
	if got := counter(t, reg, "payments_db_connection_errors_total", "read_only"); got != 1 {
		t.Errorf("read_only connection errors = %v, want 1", got)
	}

	// Promoted back (a new writable primary): the pool's next connection
	// writes; the read-only one was dropped, not reused.
	if _, err := b.admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RESET default_transaction_read_only", pgx.Identifier{name}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	if err := lock(); err != nil {
		t.Fatalf("write after the failover: %v", err)
	}
	if b.db.Pool.Stat().NewConnsCount() == newConns {
		t.Errorf("the write reused a connection to the demoted primary")
	}
	if err := b.db.Ready(ctx); err != nil {
		t.Fatalf("ready after the failover: %v", err)
	}
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func counter(t *testing.T, reg *prometheus.Registry, name, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no metric %s{kind=%q}", name, kind)
	return 0
}
