package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/acmepay/payments/api/client"
	"github.com/acmepay/payments/internal/apitest"
	"github.com/getkin/kin-openapi/openapi3"
)

// newClient is the client generated from openapi.yaml, authenticated with
// bearer, whose responses the harness validates against openapi.yaml.
func newClient(t *testing.T, e *apitest.Env, bearer string) *client.ClientWithResponses {
	t.Helper()
	c, err := client.NewClientWithResponses(e.URL,
		client.WithHTTPClient(e.HTTPClient()),
		client.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+bearer)
			return nil
		}))
	if err != nil {
		t.Fatalf("generated client: %v", err)
	}
	return c
}

// TestGeneratedClient drives the money path through the Go client that
// oapi-codegen generates from openapi.yaml (api/client): create, replay with
// the same key, read back, list by order, follow the events feed, and read
// a typed problem. It proves the spec is usable by a generator and that the
// generated types decode what the service sends.
func TestGeneratedClient(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	c := newClient(t, e, e.APIKey)
	ctx := context.Background()

	manual := client.CaptureMethod("manual")
	body := client.CreatePaymentJSONRequestBody{
		OrderId: "pedido-gen-1", Amount: 2000, Currency: "brl",
		PaymentMethod: new("pm_card_visa"), CaptureMethod: &manual,
		Metadata: &client.Metadata{"cart": "c-1"},
	}
	params := &client.CreatePaymentParams{IdempotencyKey: "gen-key-1"}
	created, err := c.CreatePaymentWithResponse(ctx, params, body)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.StatusCode() != http.StatusCreated || created.JSON201 == nil {
		t.Fatalf("create = %d %s, want 201 with a payment", created.StatusCode(), created.Body)
	}
	p := *created.JSON201
	if p.Status != client.PaymentStatus("authorized") || p.Amount != 2000 || p.Currency != "BRL" ||
		p.OrderId != "pedido-gen-1" || p.Attempt != 1 || p.Metadata["cart"] != "c-1" || p.ProviderPaymentId == nil {
		t.Fatalf("created payment = %+v", p)
	}
	if h := created.Headers201; h == nil || h.XRequestId == nil || *h.XRequestId == "" {
		t.Fatalf("create headers = %+v, want an X-Request-Id", h)
	}

	replay, err := c.CreatePaymentWithResponse(ctx, params, body)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if replay.StatusCode() != http.StatusCreated || replay.JSON201 == nil {
		t.Fatalf("replay = %d %s, want 201", replay.StatusCode(), replay.Body)
	}
	if h := replay.Headers201; h == nil || h.IdempotentReplayed == nil || *h.IdempotentReplayed != "true" {
		t.Fatalf("replay headers = %+v, want Idempotent-Replayed: true", h)
	}
	if !bytes.Equal(replay.Body, created.Body) {
		t.Fatalf("replay body %s, want the stored body %s", replay.Body, created.Body)
	}
	apitest.WantAuthorizations(t, e.Sim, 1)

	got, err := c.GetPaymentWithResponse(ctx, p.Id, nil)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.JSON200 == nil || got.JSON200.Id != p.Id || got.JSON200.Status != p.Status {
		t.Fatalf("get = %d %s, want payment %s", got.StatusCode(), got.Body, p.Id)
	}

	list, err := c.ListPaymentsWithResponse(ctx, &client.ListPaymentsParams{OrderId: "pedido-gen-1"})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if list.JSON200 == nil || len(list.JSON200.Data) != 1 || list.JSON200.Data[0].Id != p.Id {
		t.Fatalf("list = %d %s, want the one payment", list.StatusCode(), list.Body)
	}

	e.FeedCaughtUp(t) // other tests' transactions on the server may hold the feed
	events, err := c.ListEventsWithResponse(ctx, nil)
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	if events.JSON200 == nil || events.JSON200.NextCursor == "" {
		t.Fatalf("events = %d %s, want a page with a cursor", events.StatusCode(), events.Body)
	}
	var seen []client.EventType
	for _, ev := range events.JSON200.Data {
		if ev.Payment.Id == p.Id {
			seen = append(seen, ev.Type)
		}
	}
	if len(seen) != 2 || seen[0] != "payment.processing" || seen[1] != "payment.authorized" {
		t.Fatalf("events of the payment = %v, want processing then authorized", seen)
	}

	// An error is a typed problem document.
	missing, err := c.CreatePaymentWithResponse(ctx, &client.CreatePaymentParams{}, body)
	if err != nil {
		t.Fatalf("create without a key: %v", err)
	}
	if missing.ApplicationproblemJSON400 == nil || missing.ApplicationproblemJSON400.Code != client.ProblemCodeIdempotencyKeyMissing {
		t.Fatalf("create without a key = %d %s, want 400 idempotency_key_missing", missing.StatusCode(), missing.Body)
	}

	// The public operation needs no credentials.
	health, err := newClient(t, e, "-").HealthzWithResponse(ctx)
	if err != nil {
		t.Fatalf("healthz: %v", err)
	}
	if health.JSON200 == nil || health.JSON200.Status != "ok" {
		t.Fatalf("healthz = %d %s", health.StatusCode(), health.Body)
	}
}

// TestOperationsEndpointsRefuseBadQuery: the query string is checked on
// every path, so the public operations endpoints document a 400 too; the
// harness validates each answer against openapi.yaml.
func TestOperationsEndpointsRefuseBadQuery(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		r := e.Do(apitest.Request{Method: http.MethodGet, Path: path + "?probe=%00", Bearer: "-"})
		apitest.WantStatus(t, r, http.StatusBadRequest)
		if code := r.Code(t); code != "invalid_request" {
			t.Fatalf("GET %s with a NUL in the query: code %q, want invalid_request", path, code)
		}
	}
}

// TestStuckPaymentSchemaMatchesPayment: StuckPayment repeats Payment's
// fields (a generator cannot follow a $ref into another schema's
// properties, and Payment forbids extra fields, so allOf cannot add
// needs_attention); the copies must not drift apart.
func TestStuckPaymentSchemaMatchesPayment(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromFile("../openapi.yaml")
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	payment := doc.Components.Schemas["Payment"].Value
	stuck := doc.Components.Schemas["StuckPayment"].Value
	for name, want := range payment.Properties {
		got, ok := stuck.Properties[name]
		if !ok {
			t.Errorf("StuckPayment lacks Payment's %q", name)
			continue
		}
		w, _ := json.Marshal(want)
		g, _ := json.Marshal(got)
		if !bytes.Equal(w, g) {
			t.Errorf("StuckPayment.%s = %s, Payment.%s = %s", name, g, name, w)
		}
	}
	if len(stuck.Properties) != len(payment.Properties)+1 || stuck.Properties["needs_attention"] == nil {
		t.Errorf("StuckPayment has %d properties, want Payment's %d and needs_attention", len(stuck.Properties), len(payment.Properties))
	}
	want := append(slices.Clone(payment.Required), "needs_attention")
	got := slices.Clone(stuck.Required)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("StuckPayment requires %v, want %v", got, want)
	}
}
