package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/jackc/pgx/v5"
)

// TestWebhookLockWaitIsRedelivered: an event whose payment another
// transaction holds locked longer than DB_LOCK_TIMEOUT is answered 503, so
// the provider redelivers it; nothing of it is stored, and the redelivery
// once the lock is free applies it once.
func TestWebhookLockWaitIsRedelivered(t *testing.T) {
	t.Parallel()
	w := newWebhookEnvWith(t, apitest.Options{DBLockTimeout: 200 * time.Millisecond})
	id, piID := w.authorized(t, "pedido-lock")
	before := w.payment(t, id)
	payload := piSucceeded(piID, id, "manual")

	ctx := context.Background()
	holder, err := pgx.Connect(ctx, w.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM payments WHERE id = $1 FOR UPDATE", id); err != nil {
		t.Fatal(err)
	}
	deliveries := countDeliveries(t, w.Env)

	r := w.post(w.acctID, payload, signWebhook(payload, w.secret, time.Now()))
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("webhook behind a held lock answered %d %s, want 503 so the provider redelivers", r.Status, r.Body)
	}
	if n := countDeliveries(t, w.Env); n != deliveries {
		t.Fatalf("%d receipts after the 503, want %d: a stored receipt would turn the redelivery into a duplicate", n, deliveries)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	p := w.wantPaymentStatus(t, id, "authorized")
	if p["updated_at"] != before["updated_at"] {
		t.Fatalf("the refused event touched the payment: %v then %v", before["updated_at"], p["updated_at"])
	}
	if n := auditActions(t, w.Env, id, "webhook.payment_intent.succeeded"); n != 0 {
		t.Fatalf("%d webhook transitions in the audit trail after the 503, want 0", n)
	}

	wantOutcome(t, w.deliver(t, payload), "applied")
	wantOutcome(t, w.deliver(t, payload), "duplicate")
	w.wantPaymentStatus(t, id, "captured")
	wantTypes(t, paymentEvents(t, w.Env, w.apiKey, id), "payment.processing", "payment.authorized", "payment.captured")
	if n := auditActions(t, w.Env, id, "webhook.payment_intent.succeeded"); n != 1 {
		t.Fatalf("%d webhook transitions in the audit trail, want 1", n)
	}
}
