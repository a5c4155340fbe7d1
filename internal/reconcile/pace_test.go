package reconcile_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider/providersim"
	"github.com/acmepay/payments/internal/reconcile"
)

// A pass takes attempts no faster than Rate, and waits for its turn before
// claiming: with one attempt an hour and a deadline a minute away, a pass
// over three due attempts takes the first, then stops before claiming the
// second (rate.Limiter refuses a wait that would outlast the deadline), so
// the provider is asked once and nothing else is claimed or leased.
func TestRunOncePacesClaims(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect, Times: 3})
	for _, order := range []string{"pedido-pace-a", "pedido-pace-b", "pedido-pace-c"} {
		apitest.WantStatus(t, e.Create("k-"+order, apitest.CreateBody(order, 2000)), http.StatusAccepted)
	}
	before := len(e.Sim.Requests())
	r, err := reconcile.New(reconcile.Config{Payments: e.Payments, Store: e.ReconcileStore(), Now: e.ServiceClock(),
		Accounts: e.Accounts, After: 0, Rate: 1.0 / 3600})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sum, err := r.RunOnce(ctx)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("RunOnce = %+v, %v; want it stopped by the pace before the deadline", sum, err)
	}
	if sum.Examined != 1 || sum.Resolved["authorized"] != 1 {
		t.Fatalf("summary = %+v, want the one attempt the pace allowed, resolved", sum)
	}
	// One attempt re-sent (beside its keyless lookup), the others untouched.
	asked := map[string]bool{}
	for _, req := range e.Sim.Requests()[before:] {
		if req.IdempotencyKey != "" {
			asked[req.IdempotencyKey] = true
		}
	}
	if len(asked) != 1 {
		t.Fatalf("provider keys asked about = %v, want one", asked)
	}
	var claimed int
	if err := e.DB.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM attempts WHERE status = 'unknown' AND (reconcile_tries > 0 OR lease_expires_at IS NOT NULL)`).Scan(&claimed); err != nil {
		t.Fatal(err)
	}
	if claimed != 0 {
		t.Fatalf("%d attempts claimed beyond the pace, want none", claimed)
	}
}

func TestNewRefusesNegativeRate(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	_, err := reconcile.New(reconcile.Config{Payments: e.Payments, Store: e.ReconcileStore(), Accounts: e.Accounts, Rate: -1})
	if err == nil || errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("New with rate -1 = %v, want an error", err)
	}
}
