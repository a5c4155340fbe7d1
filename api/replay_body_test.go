package api_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
)

// TestReplayByBodyHash: a create's key stores the hash of its raw bytes; a
// retry with those bytes is answered without parsing them, any other body
// is parsed and its fingerprint compared, and a key stored before the hash
// was keeps the fingerprint path.
func TestReplayByBodyHash(t *testing.T) {
	t.Parallel()
	const reordered = `{"capture_method":"manual","payment_method":"pm_card_visa","currency":"brl","amount":2000,"order_id":"pedido-hash"}`

	// exec runs one statement on the test's database.
	exec := func(t *testing.T, e *apitest.Env, sql string) {
		t.Helper()
		if _, err := e.DB.Pool.Exec(context.Background(), sql); err != nil {
			t.Fatal(err)
		}
	}
	// replayed fails unless r is the first answer again, replayed.
	replayed := func(t *testing.T, name string, first, r *apitest.Response) {
		t.Helper()
		if r.Status != first.Status || r.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(r.Body, first.Body) {
			t.Fatalf("%s: got %d %s, want the byte-identical replay", name, r.Status, r.Body)
		}
	}
	reused := func(t *testing.T, name string, r *apitest.Response) {
		t.Helper()
		if r.Status != http.StatusUnprocessableEntity || r.Code(t) != "idempotency_key_reused" {
			t.Fatalf("%s: got %d %s, want 422 idempotency_key_reused", name, r.Status, r.Body)
		}
	}

	t.Run("SameBytesAreNotParsed", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		body := createBody("pedido-hash", 2000)
		first := create(e, "k-hash", body)
		wantStatus(t, first, http.StatusCreated)
		// A fingerprint no parse of these bytes yields: only a retry that
		// skips parsing can still be answered.
		exec(t, e, `UPDATE idempotency_keys SET fingerprint = '\x00'`)
		replayed(t, "same bytes", first, create(e, "k-hash", body))
		// The same request in other bytes is parsed, and meets the
		// fingerprint it cannot match.
		reused(t, "other bytes", create(e, "k-hash", reordered))
		wantEffects(t, e.Sim, 1)
	})

	t.Run("OtherBytesAreParsed", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		first := create(e, "k-hash", createBody("pedido-hash", 2000))
		wantStatus(t, first, http.StatusCreated)
		replayed(t, "reordered", first, create(e, "k-hash", reordered))
		reused(t, "other amount", create(e, "k-hash", createBody("pedido-hash", 2001)))
		// A refused body is still refused, not looked up as a replay.
		if r := create(e, "k-hash", `{"order_id":"pedido-hash","amount":2000,"amount":2000}`); r.Status != http.StatusBadRequest {
			t.Fatalf("a duplicate name: got %d %s, want 400", r.Status, r.Body)
		}
		wantEffects(t, e.Sim, 1)
	})

	t.Run("KeyWithoutHashComparesFingerprints", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		body := createBody("pedido-hash", 2000)
		first := create(e, "k-hash", body)
		wantStatus(t, first, http.StatusCreated)
		var stored bool
		if err := e.DB.Pool.QueryRow(context.Background(),
			`SELECT body_hash IS NOT NULL FROM idempotency_keys`).Scan(&stored); err != nil || !stored {
			t.Fatalf("a new key's body hash stored = %v (%v), want true", stored, err)
		}
		// As the release before the column wrote it.
		exec(t, e, `UPDATE idempotency_keys SET body_hash = NULL`)
		replayed(t, "same bytes", first, create(e, "k-hash", body))
		replayed(t, "reordered", first, create(e, "k-hash", reordered))
		exec(t, e, `UPDATE idempotency_keys SET fingerprint = '\x00'`)
		reused(t, "same bytes, parsed", create(e, "k-hash", body))
		wantEffects(t, e.Sim, 1)
	})
}
