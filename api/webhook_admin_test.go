package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
)

func adminDo(e *apitest.Env, method, path, body string) *apitest.Response {
	e.T.Helper()
	return e.Do(apitest.Request{Method: method, Path: path, Bearer: apitest.AdminToken, Body: body})
}

func TestAdminWebhooks(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{WebhookAllowPrivate: true})
	rc := &receiver{failures: 1}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	_, otherKey := e.CreateAccount("Loja Dois", "sk_test_"+apitest.SecretSuffix(t)+"b")
	mine := createEndpoint(t, e, "k-ep", srv.URL, "payment.authorized")["id"].(string)
	r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/webhook_endpoints", Key: "k-ep-2", Bearer: otherKey,
		Body: `{"url":"` + srv.URL + `/other","enabled_events":["*"]}`})
	apitest.WantStatus(t, r, http.StatusCreated)
	other := r.JSON(t)
	theirs := other["id"].(string)
	secret := other["secret"].(string)

	t.Run("ListsEveryAccountsEndpointsWithoutSecrets", func(t *testing.T) {
		var seen []string
		cursor := ""
		for range 3 {
			r := adminDo(e, http.MethodGet, "/admin/v1/webhook_endpoints?limit=1&cursor="+cursor, "")
			apitest.WantStatus(t, r, http.StatusOK)
			if strings.Contains(string(r.Body), "whsec_") || strings.Contains(string(r.Body), secret) {
				t.Fatalf("the admin list shows a secret: %s", r.Body)
			}
			var l struct {
				Data []struct {
					ID        string `json:"id"`
					AccountID string `json:"account_id"`
				} `json:"data"`
				HasMore    bool   `json:"has_more"`
				NextCursor string `json:"next_cursor"`
			}
			if err := json.Unmarshal(r.Body, &l); err != nil {
				t.Fatal(err)
			}
			for _, d := range l.Data {
				if d.AccountID == "" {
					t.Fatalf("no account_id: %s", r.Body)
				}
				seen = append(seen, d.ID)
			}
			if !l.HasMore {
				break
			}
			cursor = l.NextCursor
		}
		if len(seen) != 2 || seen[0] >= seen[1] {
			t.Fatalf("admin list paged %v, want both endpoints by id", seen)
		}
		r := adminDo(e, http.MethodGet, "/admin/v1/webhook_endpoints?account_id="+e.Account.ID, "")
		apitest.WantStatus(t, r, http.StatusOK)
		if data := r.JSON(t)["data"].([]any); len(data) != 1 || data[0].(map[string]any)["id"] != mine {
			t.Fatalf("filtered by account: %s", r.Body)
		}
		// The merchant's key is not an admin token.
		apitest.WantStatus(t, e.Do(apitest.Request{Method: http.MethodGet, Path: "/admin/v1/webhook_endpoints"}), http.StatusUnauthorized)
	})

	t.Run("DeliveriesAndAnAuditedRedeliveryOfAnyAccountsEvent", func(t *testing.T) {
		apitest.WantStatus(t, e.Create("k-pay", apitest.CreateBody("pedido-admin", 2000)), http.StatusCreated)
		job := webhookJobsFor(t, e, mine)[0]
		res, _ := e.WorkWebhookJob(t, job) // 503 first
		if _, err := e.WorkWebhookJob(t, res.Job); err != nil {
			t.Fatal(err)
		}
		eventID := func() string {
			rc.mu.Lock()
			defer rc.mu.Unlock()
			return rc.got[0].Header.Get("webhook-id")
		}()
		for _, path := range []string{"/admin/v1/webhook_endpoints/" + mine + "/deliveries", "/admin/v1/events/" + eventID + "/deliveries"} {
			r := adminDo(e, http.MethodGet, path, "")
			apitest.WantStatus(t, r, http.StatusOK)
			if data := r.JSON(t)["data"].([]any); len(data) != 2 {
				t.Fatalf("%s: %s, want 2 attempts", path, r.Body)
			}
		}
		r := adminDo(e, http.MethodGet, "/admin/v1/webhook_endpoints/"+theirs+"/deliveries", "")
		apitest.WantStatus(t, r, http.StatusOK)
		if data := r.JSON(t)["data"].([]any); len(data) != 0 {
			t.Fatalf("the other endpoint's deliveries: %s", r.Body)
		}
		apitest.WantStatus(t, adminDo(e, http.MethodGet, "/admin/v1/webhook_endpoints/we_nope/deliveries", ""), http.StatusNotFound)
		apitest.WantStatus(t, adminDo(e, http.MethodGet, "/admin/v1/events/evt_nope/deliveries", ""), http.StatusNotFound)

		// Redelivery needs an actor and a reason, and leaves them in the audit.
		wantProblem(t, adminDo(e, http.MethodPost, "/admin/v1/events/"+eventID+"/redeliver", `{"actor":"ops@acmepay.dev"}`),
			http.StatusBadRequest, "invalid_request")
		wantProblem(t, adminDo(e, http.MethodPost, "/admin/v1/events/evt_nope/redeliver", replayBody), http.StatusNotFound, "not_found")
		jobs := len(webhookJobsFor(t, e, mine))
		r = adminDo(e, http.MethodPost, "/admin/v1/events/"+eventID+"/redeliver", replayBody)
		apitest.WantStatus(t, r, http.StatusAccepted)
		if r.JSON(t)["account_id"] != e.Account.ID {
			t.Fatalf("redeliver = %s", r.Body)
		}
		if n := len(webhookJobsFor(t, e, mine)); n != jobs+1 {
			t.Fatalf("%d jobs after the redelivery, want %d", n, jobs+1)
		}
		if n := len(webhookJobsFor(t, e, theirs)); n != 0 {
			t.Fatalf("another account's endpoint got %d jobs from the redelivery", n)
		}
		var actor, action, reason, account string
		if err := e.DB.Pool.QueryRow(context.Background(),
			`SELECT actor, action, reason, account_id FROM webhook_audit_log WHERE event_id = $1`, eventID).Scan(&actor, &action, &reason, &account); err != nil {
			t.Fatalf("audit entry: %v", err)
		}
		if actor != "ops@acmepay.dev" || action != "event.redeliver" || reason != "customer reported no confirmation" || account != e.Account.ID {
			t.Fatalf("audit = %s %s %q %s", actor, action, reason, account)
		}
	})
}
