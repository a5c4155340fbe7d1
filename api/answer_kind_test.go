package api_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider"
)

// An answer is stored as a kind and a body; the release before stored
// only the HTTP status. Answers stored in that form still replay byte for
// byte, with the status and headers they were first given.
func TestAnswersStoredBeforeTheirKindReplay(t *testing.T) {
	t.Parallel()
	e := proofEnv(t, apitest.Options{})
	created := create(e, "k-old-create", createBody("pedido-old-1", 2000))
	wantStatus(t, created, http.StatusCreated)
	id := created.JSON(t)["id"].(string)
	ok := capture(e, id, "k-old-capture", "")
	wantStatus(t, ok, http.StatusOK)

	rejected := authorized(t, e, "pedido-old-2", 2000)
	prov, creds := dashboard(e)
	pi := getPaymentJSON(t, e, rejected)["provider_payment_id"].(string)
	if res := prov.Cancel(context.Background(), creds, provider.CancelRequest{IdempotencyKey: "dashboard-cancel", IntentID: pi}); res.Answer != provider.AnswerObject {
		t.Fatalf("dashboard cancel: %+v", res)
	}
	refused := capture(e, rejected, "k-old-refused", "")
	wantProblem(t, refused, http.StatusConflict, "provider_rejected")

	kinds := map[string]int{}
	rows, err := e.DB.Pool.Query(context.Background(),
		`SELECT response_kind, response_status FROM idempotency_keys WHERE state = 'completed' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var kind string
		var status int
		if err := rows.Scan(&kind, &status); err != nil {
			t.Fatal(err)
		}
		kinds[kind] = status
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	// The release before reads response_status: it is still written.
	if kinds["created"] != 201 || kinds["ok"] != 200 || kinds["refused"] != 409 {
		t.Fatalf("stored kinds and legacy statuses = %v", kinds)
	}

	if _, err := e.DB.Pool.Exec(context.Background(), `UPDATE idempotency_keys SET response_kind = NULL`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		first *apitest.Response
		again *apitest.Response
	}{
		{"created", created, create(e, "k-old-create", createBody("pedido-old-1", 2000))},
		{"ok", ok, capture(e, id, "k-old-capture", "")},
		{"refused", refused, capture(e, rejected, "k-old-refused", "")},
	} {
		if c.again.Status != c.first.Status || c.again.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("%s: replay = %d replayed=%q, want %d replayed", c.name, c.again.Status,
				c.again.Header.Get("Idempotent-Replayed"), c.first.Status)
		}
		if c.name != "refused" && !bytes.Equal(c.again.Body, c.first.Body) {
			t.Errorf("%s: replay differs:\n%s\n%s", c.name, c.first.Body, c.again.Body)
		}
		if c.name == "refused" && (c.again.Code(t) != "provider_rejected" ||
			c.again.JSON(t)["provider_code"] != c.first.JSON(t)["provider_code"]) {
			t.Errorf("refused: replay = %s, want the stored refusal", c.again.Body)
		}
	}
}
