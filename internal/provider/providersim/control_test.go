package providersim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// ctl calls the control API and decodes a JSON answer into out (if non-nil).
func (e *env) ctl(t *testing.T, method, path, body string, wantStatus int, out any) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != wantStatus {
		t.Fatalf("%s %s = %d %s, want %d", method, path, res.StatusCode, b, wantStatus)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

func TestControlAPI(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)

	var created struct{ ID int }
	e.ctl(t, "POST", "/_sim/faults", `{"op":"authorize","kind":"error_500_before_effect","times":1}`, 200, &created)
	_, err := sc.PaymentIntents.New(authorize("k", "pm_card_visa", "manual", 100, "pay_1"))
	stripeErr(t, err, http.StatusInternalServerError)

	var status struct {
		Hits    int
		Reached bool
	}
	e.ctl(t, "GET", fmt.Sprintf("/_sim/faults/%d", created.ID), "", 200, &status)
	if status.Hits != 1 || !status.Reached {
		t.Fatalf("fault status = %+v", status)
	}

	// A hold driven entirely over HTTP.
	e.ctl(t, "POST", "/_sim/faults", `{"idempotency_key":"k","kind":"hold_before_effect"}`, 200, &created)
	errc := make(chan error, 1)
	go func() {
		_, err := sc.PaymentIntents.New(authorize("k", "pm_card_visa", "manual", 100, "pay_1"))
		errc <- err
	}()
	eventually(t, "hold reached", func() bool {
		e.ctl(t, "GET", fmt.Sprintf("/_sim/faults/%d", created.ID), "", 200, &status)
		return status.Reached
	})
	e.ctl(t, "POST", fmt.Sprintf("/_sim/faults/%d/release", created.ID), "", 204, nil)
	if err := recv(t, errc, "the held authorization's answer"); err != nil {
		t.Fatal(err)
	}

	var stats struct {
		Stats
		ByKey map[string]Stats `json:"by_key"`
	}
	e.ctl(t, "GET", "/_sim/stats", "", 200, &stats)
	if stats.Authorizations != 1 || stats.Requests != 2 || stats.ByKey[keyA].Authorizations != 1 {
		t.Fatalf("stats = %+v", stats)
	}
	var log []Request
	e.ctl(t, "GET", "/_sim/requests", "", 200, &log)
	if len(log) != 2 || log[0].Fault != Error500BeforeEffect || log[0].Status != 500 || log[1].IdempotencyKey != "k" || log[1].Op != "authorize" {
		t.Fatalf("requests = %+v", log)
	}
	var intents []Intent
	e.ctl(t, "GET", "/_sim/intents?secret_key="+keyA, "", 200, &intents)
	if len(intents) != 1 || intents[0].Status != "requires_capture" {
		t.Fatalf("intents = %+v", intents)
	}

	// forget-keys: the same key creates a second intent.
	e.ctl(t, "POST", "/_sim/forget-keys", "", 204, nil)
	if _, err := sc.PaymentIntents.New(authorize("k", "pm_card_visa", "manual", 100, "pay_1")); err != nil {
		t.Fatal(err)
	}
	if got := e.sim.Stats().Authorizations; got != 2 {
		t.Fatalf("authorizations = %d", got)
	}

	e.ctl(t, "POST", "/_sim/random-faults", `{"error_500":1}`, 204, nil)
	_, err = sc.PaymentIntents.New(authorize("k3", "pm_card_visa", "manual", 100, "pay_3"))
	stripeErr(t, err, http.StatusInternalServerError)
	e.ctl(t, "POST", "/_sim/random-faults", `{}`, 204, nil)

	e.ctl(t, "POST", "/_sim/faults", `{"kind":"delay_after_effect","delay":"1ms"}`, 200, &created)
	e.ctl(t, "DELETE", "/_sim/faults", "", 204, nil)
	e.ctl(t, "GET", fmt.Sprintf("/_sim/faults/%d", created.ID), "", 404, nil)

	e.ctl(t, "POST", "/_sim/faults", `{"kind":"explode"}`, 400, nil)
	e.ctl(t, "POST", "/_sim/faults", `{"kind":"delay_after_effect","delay":"soon"}`, 400, nil)
	e.ctl(t, "POST", "/_sim/random-faults", `{"drop":0.7,"error_500":0.7}`, 400, nil)
	e.ctl(t, "GET", "/_sim/nothing", "", 404, nil)
}
