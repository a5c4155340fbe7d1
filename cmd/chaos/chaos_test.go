package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/acmepay/payments/internal/chaos"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
)

// logWriter forwards whole lines to t.Log.
type logWriter struct {
	t   *testing.T
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line)
			return len(p), nil
		}
		w.t.Log(strings.TrimRight(line, "\n"))
	}
}

// TestChaosShort is `make chaos -short` inside `make test`: the real
// binaries, provider faults, replica kills, revoked credentials, closing
// re-send windows and webhooks for about 30 s, then reconciliation and the
// invariants.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos run builds and runs the real binaries for about a minute; skipped in -short")
	}
	shortRun(t, chaos.Config{Short: true, Out: &logWriter{t: t}})
}

// TestChaosShortPgBouncer is the same run with the replicas behind
// PgBouncer in transaction mode (DATABASE_URL through the pooler,
// MIGRATE_DATABASE_URL direct): the same invariants.
func TestChaosShortPgBouncer(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos run builds and runs the real binaries for about a minute; skipped in -short")
	}
	shortRun(t, chaos.Config{Short: true, Out: &logWriter{t: t}, Pooler: func(direct string) (string, error) {
		return postgrestest.PgBouncer(t, direct), nil
	}})
}

func shortRun(t *testing.T, cfg chaos.Config) {
	var figures bytes.Buffer
	rep, err := chaos.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("the chaos run could not be carried out: %v", err)
	}
	rep.Print(&figures)
	t.Log(figures.String())
	if n := rep.Violations(); n > 0 {
		t.Fatalf("%d invariant violations:\n%s", n, figures.String())
	}
	// The two faults must really have happened, or the run proved nothing
	// about them.
	if rep.Lookups() == 0 {
		t.Errorf("no attempt was settled by a lookup past its re-send window: key expiry was not exercised")
	}
	// The feed was read across a boundary of the xid8's decimal length or
	// epoch, which a fresh cluster would not reach for a long time.
	if !rep.Xid.CrossedPlanned() {
		t.Errorf("the run's xid8 did not cross the boundary its cluster was moved below: %s", rep.Xid)
	}
	if rep.ProviderPayments("mercadopago") == 0 || rep.ProviderPayments("stripe") == 0 {
		t.Errorf("payments at Stripe %d, at Mercado Pago %d: both providers must be exercised",
			rep.ProviderPayments("stripe"), rep.ProviderPayments("mercadopago"))
	}
	// A revocation is exercised when the provider refused a request under
	// it: a first send (which fails its attempt), a re-send or a lookup
	// (which prove nothing and leave it unknown). Which of them a short
	// run meets is chance.
	if refused := rep.Refused.FirstSends + rep.Refused.Resends + rep.Refused.Lookups; rep.Revocations == 0 || refused == 0 {
		t.Errorf("%d revocations, %d requests refused: credential rotation was not exercised", rep.Revocations, refused)
	}
}
