package api_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
	"github.com/acmepay/payments/internal/reconcile"
)

// almostOne makes every backoff its full length, so a schedule is exact.
func almostOne() float64 { return 1 - 1e-9 }

func TestReconcileSchedule(t *testing.T) {
	t.Parallel()

	t.Run("FailingProviderIsAskedOncePerDueTimeNotOncePerPass", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect})
		createUnknown(t, e, "k-sched", createBody("pedido-sched", 1500))
		r, err := reconcile.New(reconcile.Config{Payments: e.Payments, Store: e.ReconcileStore(), Now: e.ServiceClock(), Accounts: e.Accounts,
			After: 15 * time.Second, MaxBackoff: time.Hour, Jitter: almostOne})
		if err != nil {
			t.Fatal(err)
		}
		// Six minutes of passes 5 s apart while the provider answers 500.
		var tried []int
		for pass := 1; pass <= 72; pass++ {
			e.Clock.Advance(5 * time.Second)
			before := len(opRequests(e.Sim, "authorize"))
			if _, err := r.RunOnce(context.Background()); err != nil {
				t.Fatalf("pass %d: %v", pass, err)
			}
			if n := len(opRequests(e.Sim, "authorize")) - before; n > 0 {
				if n != 1 {
					t.Fatalf("pass %d sent %d times, want at most once", pass, n)
				}
				tried = append(tried, pass)
			}
		}
		// Tries 15 s, 30 s, 1 min and 2 min apart (3, 6, 12 and 24 passes),
		// then the next is due after the run; the old loop asked every pass.
		if len(tried) != 5 {
			t.Fatalf("reconciler asked the provider in passes %v: %d times, want 5", tried, len(tried))
		}
		for i, want := range []int{3, 6, 12, 24} {
			if gap := tried[i+1] - tried[i]; gap != want {
				t.Fatalf("tries in passes %v: gap %d is %d passes, want %d", tried, i+1, gap, want)
			}
		}
		wantOnlyKey(t, opRequests(e.Sim, "authorize"), "pedido-sched:autorizar-v1")
	})
}

func TestReconcileLease(t *testing.T) {
	t.Parallel()

	t.Run("SlowCallsAreNeverSentTwiceAtOnce", func(t *testing.T) {
		t.Parallel()
		// A claim holds its attempt for the call (PROVIDER_TIMEOUT) and a
		// try at recording it, longer than IN_PROGRESS_LEASE here.
		e := apitest.New(t, apitest.Options{Lease: 10 * time.Second, ProviderTimeout: 20 * time.Second})
		down := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect})
		orders := []string{"pedido-slow-a", "pedido-slow-b", "pedido-slow-c"}
		for _, o := range orders {
			createUnknown(t, e, "k-"+o, createBody(o, 700))
			e.Clock.Advance(time.Millisecond) // a stable claim order
		}
		down.Remove()
		hold := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.HoldBeforeEffect, Times: 1})
		first, err := reconcile.New(reconcile.Config{Payments: e.Payments, Store: e.ReconcileStore(), Now: e.ServiceClock(), Accounts: e.Accounts, After: 0})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := first.RunOnce(context.Background())
			done <- err
		}()
		apitest.Recv(t, hold.Reached(), "the first reconciler's call to reach the provider")
		// The provider is slow: longer than IN_PROGRESS_LEASE, though within
		// PROVIDER_TIMEOUT, passes while the first reconciler waits on its
		// first attempt. A second reconciler takes what the first has not
		// started, never the attempt whose call is still out.
		e.Clock.Advance(15 * time.Second)
		_, svc, _ := e.StartInstance()
		second, err := reconcile.New(reconcile.Config{Payments: svc, Store: e.ReconcileStore(), Now: e.ServiceClock(), Accounts: e.Accounts, After: 0})
		if err != nil {
			t.Fatal(err)
		}
		sum, err := second.RunOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if sum.Examined != 2 || sum.Resolved["authorized"] != 2 {
			t.Fatalf("second reconciler = %+v, want the two attempts not yet started", sum)
		}
		hold.Release()
		if err := apitest.Recv(t, done, "the first reconciler's pass"); err != nil {
			t.Fatal(err)
		}
		sends := map[string]int{}
		for _, k := range opRequests(e.Sim, "authorize") {
			sends[k]++
		}
		for _, o := range orders {
			// The first send (500) and one recovery; never a second
			// recovery send racing the first.
			if n := sends[o+":autorizar-v1"]; n != 2 {
				t.Fatalf("sends per key = %v; %s sent %d times, want 2", sends, o, n)
			}
		}
		apitest.WantAuthorizations(t, e.Sim, 3)
	})

	t.Run("ClaimTooLateForACallSendsNothing", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect, Times: 1})
		p := createUnknown(t, e, "k-late", createBody("pedido-late", 900))
		now := e.Clock.Now().Add(time.Second)
		rec, err := reconcile.New(reconcile.Config{Payments: e.Payments, Store: e.ReconcileStore(), Now: e.ServiceClock(), Accounts: e.Accounts})
		if err != nil {
			t.Fatal(err)
		}
		a, err := rec.ClaimNext(context.Background(), reconcile.Due{UpdatedBefore: now, Before: now},
			func(int) time.Time { return now })
		if err != nil {
			t.Fatal(err)
		}
		if a.PaymentID != p["id"] || a.LeaseExpiresAt == nil {
			t.Fatalf("claimed %+v, want the attempt of %v with a lease", a, p["id"])
		}
		// The claimer stalled (a GC pause, a stopped VM) past its lease.
		e.Clock.Advance(a.LeaseExpiresAt.Sub(e.Clock.Now()) + time.Second)
		acct, err := e.Accounts.Merchant(context.Background(), a.AccountID)
		if err != nil {
			t.Fatal(err)
		}
		res, err := rec.Attempt(context.Background(), acct, a, "reconciler", "")
		if err != nil || res.Resolved {
			t.Fatalf("Attempt = %+v, %v; want nothing resolved", res, err)
		}
		wantKeys(t, opRequests(e.Sim, "authorize"), "pedido-late:autorizar-v1")
		if v := adminGet(t, e, p["id"].(string)); v.Attempts[0].Status != "unknown" {
			t.Fatalf("attempt = %v, want still unknown", v.Attempts[0])
		}
		// The attempt stays due: the next pass resolves it.
		if sum := runOnce(t, e, nil); sum.Resolved["authorized"] != 1 {
			t.Fatalf("next pass = %+v, want it authorized", sum)
		}
	})
}

func TestReconcileNeedsAttention(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect})
	old := createUnknown(t, e, "k-old-attention", createBody("pedido-old", 1200))["id"].(string)
	e.Clock.Advance(61 * time.Minute) // past RECONCILE_ALERT_AFTER's 1h
	fresh := createUnknown(t, e, "k-fresh-attention", createBody("pedido-fresh", 1200))["id"].(string)

	r, err := reconcile.New(reconcile.Config{Payments: e.Payments, Store: e.ReconcileStore(), Now: e.ServiceClock(), Accounts: e.Accounts, Metrics: e.Metrics, Logger: e.Logger(), After: 0})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := r.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Examined != 2 || sum.StillUnknown != 2 || sum.NeedsAttention != 1 {
		t.Fatalf("pass = %+v, want 2 examined, 2 still unknown, 1 needing attention", sum)
	}
	if got := scrapeMetrics(t, e).get("payments_reconciler_attempts_needing_attention"); got != 1 {
		t.Fatalf("payments_reconciler_attempts_needing_attention = %v, want 1", got)
	}
	var warned []string
	for _, line := range strings.Split(e.Logs.String(), "\n") {
		if strings.Contains(line, "attempt needs attention") {
			warned = append(warned, line)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], old) || !strings.Contains(warned[0], `"level":"WARN"`) {
		t.Fatalf("warnings = %q, want one WARN line for %s", warned, old)
	}

	r2 := e.Do(apitest.Request{Method: http.MethodGet, Path: "/admin/v1/payments?status=unknown&older_than=0s", Bearer: apitest.AdminToken})
	wantStatus(t, r2, http.StatusOK)
	flags := map[string]any{}
	for _, d := range r2.JSON(t)["data"].([]any) {
		p := d.(map[string]any)
		flags[p["id"].(string)] = p["needs_attention"]
	}
	if flags[old] != true || flags[fresh] != false || len(flags) != 2 {
		t.Fatalf("needs_attention = %v, want %s true and %s false", flags, old, fresh)
	}
}

func TestAdminStuckListPages(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect})
	var want []string
	for _, o := range []string{"pedido-p1", "pedido-p2", "pedido-p3"} {
		want = append(want, createUnknown(t, e, "k-"+o, createBody(o, 100))["id"].(string))
	}
	var got []string
	after := ""
	for page := 0; ; page++ {
		if page > 3 {
			t.Fatalf("still paging after %v", got)
		}
		r := e.Do(apitest.Request{Method: http.MethodGet, Bearer: apitest.AdminToken,
			Path: "/admin/v1/payments?status=unknown&older_than=0s&limit=1&after=" + url.QueryEscape(after)})
		wantStatus(t, r, http.StatusOK)
		body := r.JSON(t)
		for _, d := range body["data"].([]any) {
			got = append(got, d.(map[string]any)["id"].(string))
		}
		after = body["next_cursor"].(string)
		if body["has_more"] != true {
			break
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("pages = %v, want %v once each, oldest first", got, want)
	}
	for _, bad := range []string{"not-a-cursor", "bm9wZQ", url.QueryEscape("MTIz.pay_x")} {
		r := e.Do(apitest.Request{Method: http.MethodGet, Bearer: apitest.AdminToken, Path: "/admin/v1/payments?after=" + bad})
		wantProblem(t, r, http.StatusBadRequest, "invalid_request")
		if !strings.Contains(string(r.Body), `"after"`) {
			t.Fatalf("after=%s: %s, want the field named", bad, r.Body)
		}
	}
}
