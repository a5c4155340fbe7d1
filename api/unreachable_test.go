package api_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/providertest"
	"github.com/acmepay/payments/internal/provider/stripe"
)

// TestUnreachableProvider holds the service to CONTRACT §15: a request that
// never reached the provider (here a refused connection) proves on a first
// send that nothing ran, so the payment is failed with
// provider_unreachable; on a recovery it proves nothing.
func TestUnreachableProvider(t *testing.T) {
	t.Parallel()

	t.Run("StripeOnAFirstSendFailsThePayment", func(t *testing.T) {
		t.Parallel()
		closed := providertest.ClosedURL(t)
		e := proofEnv(t, apitest.Options{WrapProvider: apitest.WrapStripe(func(provider.Provider) provider.Provider {
			return stripe.New(stripe.Config{APIBase: closed, KeyRetention: proofRetention})
		})})
		body := createBody("pedido-unreach", 2000)
		r := create(e, "k-unreach", body)
		wantFailedUnreachable(t, e, r)
		// The client's retry gets the stored answer.
		again := create(e, "k-unreach", body)
		wantStatus(t, again, http.StatusCreated)
		if string(again.Body) != string(r.Body) {
			t.Fatalf("retry = %s, want the stored %s", again.Body, r.Body)
		}
		wantEffects(t, e.Sim, 0)
	})

	t.Run("StripeOnARecoveryProvesNothing", func(t *testing.T) {
		t.Parallel()
		sw := &outage{down: stripe.New(stripe.Config{APIBase: providertest.ClosedURL(t), KeyRetention: proofRetention})}
		e := proofEnv(t, apitest.Options{WrapProvider: apitest.WrapStripe(func(p provider.Provider) provider.Provider {
			sw.Provider = p
			return sw
		})})
		drop := dropAuthorize(e)
		body := createBody("pedido-unreach-rec", 2000)
		p := createUnknown(t, e, "k-unreach-rec", body)
		drop.Remove()
		id := p["id"].(string)
		sw.off.Store(true)

		// The client's retry after the lease re-sends, and so does the
		// reconciler: both meet a refused connection.
		e.Clock.Advance(time.Minute)
		wantStatus(t, create(e, "k-unreach-rec", body), http.StatusAccepted)
		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{}, 1)
		if got := getPaymentJSON(t, e, id); got["status"] != "unknown" {
			t.Fatalf("payment = %v, want unknown: the first send charged", got)
		}
		sw.off.Store(false)
		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"authorized": 1}, 0)
		if got := getPaymentJSON(t, e, id); got["status"] != "authorized" {
			t.Fatalf("payment = %v, want the first send's authorization", got)
		}
		wantEffects(t, e.Sim, 1)
	})

	t.Run("MercadoPagoOnAFirstSendFailsThePayment", func(t *testing.T) {
		t.Parallel()
		s := newMPShopWith(t, apitest.Options{MercadoPagoAPIBase: providertest.ClosedURL(t)})
		body := fmt.Sprintf(`{"order_id":"pedido-mp-unreach","amount":5000,"currency":"BRL","payment_method":"pix",%s}`, mpBilling)
		r := s.create("k-mp-unreach", body)
		wantFailedUnreachable(t, s.Env, r)
		if n := len(s.payments()); n != 0 {
			t.Fatalf("%d payments at Mercado Pago, want none", n)
		}
	})
}

// TestFailoverOnUnreachable: the failover of CONTRACT §15 on real sockets.
// A Stripe that refuses the connection did nothing, so the create moves to
// Mercado Pago; one whose first try wrote the request before its retry was
// refused may have charged, so the create stays unknown at Stripe.
func TestFailoverOnUnreachable(t *testing.T) {
	t.Parallel()

	t.Run("RefusedConnectionFailsOver", func(t *testing.T) {
		t.Parallel()
		closed := providertest.ClosedURL(t)
		s := newFailoverShop(t, apitest.Options{WrapProvider: apitest.WrapStripe(func(provider.Provider) provider.Provider {
			return stripe.New(stripe.Config{APIBase: closed})
		})})
		r := create(s.Env, "k-fo-unreach", bothCardsBody("pedido-fo-unreach"))
		wantStatus(t, r, http.StatusCreated)
		p := r.JSON(t)
		if p["status"] != "captured" || p["provider"] != "mercadopago" || p["attempt"] != float64(2) {
			t.Fatalf("payment %s", r.Body)
		}
		wantAttempts(t, attemptTrail(t, s.Env, p["id"].(string)),
			"stripe pedido-fo-unreach:autorizar-v1 failed provider_unreachable",
			"mercadopago pedido-fo-unreach:autorizar-v2 succeeded ")
	})

	t.Run("RetryRefusedAfterAWrittenTryStaysUnknown", func(t *testing.T) {
		t.Parallel()
		base := providertest.OnceThenRefused(t)
		s := newFailoverShop(t, apitest.Options{WrapProvider: apitest.WrapStripe(func(provider.Provider) provider.Provider {
			return stripe.New(stripe.Config{APIBase: base, MaxNetworkRetries: 1})
		})})
		r := create(s.Env, "k-fo-written", bothCardsBody("pedido-fo-written"))
		wantStatus(t, r, http.StatusAccepted)
		p := r.JSON(t)
		if p["status"] != "unknown" || p["provider"] != "stripe" || p["attempt"] != float64(1) {
			t.Fatalf("payment %s", r.Body)
		}
		if n := countOp(s.Sim, "mp_create"); n != 0 {
			t.Fatalf("%d requests at Mercado Pago, want none", n)
		}
	})

	t.Run("CircuitOpensOnUnreachableFirstSends", func(t *testing.T) {
		t.Parallel()
		closed := providertest.ClosedURL(t)
		// A cooldown no test outlives: the circuit stays open.
		s := newFailoverShop(t, apitest.Options{CircuitFailures: 2, CircuitCooldown: time.Hour, WrapProvider: apitest.WrapStripe(func(provider.Provider) provider.Provider {
			return stripe.New(stripe.Config{APIBase: closed})
		})})
		for i := range 2 {
			wantStatus(t, create(s.Env, fmt.Sprintf("k-fo-c%d", i), bothCardsBody(fmt.Sprintf("pedido-fo-c%d", i))), http.StatusCreated)
		}
		// Open: the next create skips Stripe without an attempt there.
		r := create(s.Env, "k-fo-c2", bothCardsBody("pedido-fo-c2"))
		wantStatus(t, r, http.StatusCreated)
		p := r.JSON(t)
		wantAttempts(t, attemptTrail(t, s.Env, p["id"].(string)), "mercadopago pedido-fo-c2:autorizar-v1 succeeded ")

		// A card only Stripe can take: refused before anything is
		// reserved, so the client's retry after the cooldown is a new
		// create.
		var keys, payments int
		count := func() {
			t.Helper()
			if err := s.DB.Pool.QueryRow(context.Background(),
				`SELECT (SELECT count(*) FROM idempotency_keys), (SELECT count(*) FROM payments)`).Scan(&keys, &payments); err != nil {
				t.Fatal(err)
			}
		}
		count()
		k0, p0 := keys, payments
		only := create(s.Env, "k-fo-c3", `{"order_id":"pedido-fo-c3","amount":2500,"currency":"BRL","payment_methods":{"stripe":"pm_card_visa"}}`)
		wantProblem(t, only, http.StatusServiceUnavailable, "unavailable")
		count()
		if keys != k0 || payments != p0 {
			t.Fatalf("keys %d→%d, payments %d→%d: an open circuit's refusal reserved something", k0, keys, p0, payments)
		}
	})
}

// wantFailedUnreachable checks a create's answer and its one attempt:
// failed, provider_unreachable.
func wantFailedUnreachable(t *testing.T, e *apitest.Env, r *apitest.Response) {
	t.Helper()
	wantStatus(t, r, http.StatusCreated)
	p := r.JSON(t)
	if p["status"] != "failed" || p["failure_code"] != provider.FailureUnreachable {
		t.Fatalf("payment = %s, want failed with %s", r.Body, provider.FailureUnreachable)
	}
	attempts, err := e.ReconcileStore().AttemptListByPayment(context.Background(), p["id"].(string))
	if err != nil || len(attempts) != 1 {
		t.Fatalf("attempts %+v, %v; want one", attempts, err)
	}
	if a := attempts[0]; a.Status != "failed" || a.FailureCode != provider.FailureUnreachable {
		t.Fatalf("attempt %s %q, want failed %s", a.Status, a.FailureCode, provider.FailureUnreachable)
	}
}

// outage sends authorizations to down while off is set, to the provider
// otherwise.
type outage struct {
	provider.Provider
	down provider.Provider
	off  atomic.Bool
}

func (o *outage) SearchIntentByPaymentID(ctx context.Context, c provider.Credentials, id string) (*provider.Intent, error) {
	if o.off.Load() {
		return o.down.SearchIntentByPaymentID(ctx, c, id)
	}
	return o.Provider.SearchIntentByPaymentID(ctx, c, id)
}

func (o *outage) Authorize(ctx context.Context, c provider.Credentials, r provider.AuthorizeRequest) provider.Result {
	if o.off.Load() {
		return o.down.Authorize(ctx, c, r)
	}
	return o.Provider.Authorize(ctx, c, r)
}
