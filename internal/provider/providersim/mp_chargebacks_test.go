package providersim

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// A refund made in the dashboard shows in the payment, its refunds and a
// notification, without an API refund.
func TestMPDashboardRefund(t *testing.T) {
	e := start(t, Options{})
	p := e.mp(t, "POST", "/v1/payments", mpToken, "k1", mpCard("tok_APRO", 100)).want(t, http.StatusCreated)
	res, err := e.http.Post(e.url+"/_sim/mp/payments/"+p.id()+"/dashboard-refund", "application/json", strings.NewReader(`{"amount":2500}`))
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("dashboard refund: %v %v", err, res)
	}
	res.Body.Close()
	g := e.mp(t, "GET", "/v1/payments/"+p.id(), mpToken, "", nil)
	if g.state() != "approved/partially_refunded" || g.body["transaction_amount_refunded"] != 25.0 {
		t.Fatalf("after a partial dashboard refund: %s", g.raw)
	}
	if _, err := e.sim.MPDashboardRefund(mustMPID(t, p.id()), 7500); err != nil {
		t.Fatal(err)
	}
	if g := e.mp(t, "GET", "/v1/payments/"+p.id(), mpToken, "", nil); g.state() != "refunded/refunded" || g.body["transaction_amount_refunded"] != 100.0 {
		t.Fatalf("after the rest: %s", g.raw)
	}
	if _, err := e.sim.MPDashboardRefund(mustMPID(t, p.id()), 1); err == nil {
		t.Fatal("refunded more than the payment")
	}
	if rs := e.mp(t, "GET", "/v1/payments/"+p.id()+"/refunds", mpToken, "", nil); !strings.Contains(string(rs.raw), `"amount":25`) {
		t.Fatalf("refunds: %s", rs.raw)
	}
	if st := e.sim.Stats(); st.Refunds != 0 {
		t.Fatalf("%d API refunds counted, want 0", st.Refunds)
	}
	if n := len(e.sim.Events(mpToken)); n != 3 {
		t.Fatalf("%d notifications, want created and two updates", n)
	}
}

// A chargeback charges the payment back, is found by id and by payment,
// and is decided once.
func TestMPChargeback(t *testing.T) {
	e := start(t, Options{})
	p := e.mp(t, "POST", "/v1/payments", mpToken, "k1", mpCard("tok_APRO", 100)).want(t, http.StatusCreated)
	res, err := e.http.Post(e.url+"/_sim/mp/payments/"+p.id()+"/chargeback", "application/json", strings.NewReader(`{"amount":4000}`))
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("chargeback: %v %v", err, res)
	}
	res.Body.Close()
	cbs := e.mp(t, "GET", "/v1/chargebacks/search?payment_id="+p.id(), mpToken, "", nil)
	results := cbs.body["results"].([]any)
	if len(results) != 1 {
		t.Fatalf("search: %s", cbs.raw)
	}
	cb := results[0].(map[string]any)
	id := cb["id"].(string)
	if cb["amount"] != 40.0 || cb["coverage_applied"] != nil || cb["date_documentation_deadline"] == nil {
		t.Fatalf("chargeback: %v", cb)
	}
	if g := e.mp(t, "GET", "/v1/payments/"+p.id(), mpToken, "", nil); g.state() != "charged_back/in_process" {
		t.Fatalf("payment: %s", g.state())
	}
	if other := e.mp(t, "GET", "/v1/chargebacks/search?payment_id=1", mpToken, "", nil); len(other.body["results"].([]any)) != 0 {
		t.Fatalf("another payment's search: %s", other.raw)
	}
	res, err = e.http.Post(e.url+"/_sim/mp/chargebacks/"+id+"/decide", "application/json", strings.NewReader(`{"status":"won"}`))
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("decide: %v %v", err, res)
	}
	res.Body.Close()
	got := e.mp(t, "GET", "/v1/chargebacks/"+id, mpToken, "", nil).want(t, http.StatusOK)
	if got.body["coverage_applied"] != true || got.body["payments"].([]any)[0] != mustFloat(t, p.id()) {
		t.Fatalf("decided chargeback: %s", got.raw)
	}
	if g := e.mp(t, "GET", "/v1/payments/"+p.id(), mpToken, "", nil); g.state() != "charged_back/reimbursed" {
		t.Fatalf("payment after the decision: %s", g.state())
	}
	if _, err := e.sim.MPDecideChargeback(id, false); err == nil {
		t.Fatal("decided twice")
	}
	e.mp(t, "GET", "/v1/chargebacks/999", mpToken, "", nil).want(t, http.StatusNotFound)
	var topics []string
	for _, ev := range e.sim.Events(mpToken) {
		topics = append(topics, ev.mpTopic+":"+ev.mpDataID)
	}
	want := "payment:" + p.id() + " topic_chargebacks_wh:" + id + " payment:" + p.id() + " topic_chargebacks_wh:" + id + " payment:" + p.id()
	if strings.Join(topics, " ") != want {
		t.Fatalf("notifications %v, want %s", topics, want)
	}
}

func mustMPID(t *testing.T, id string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustFloat(t *testing.T, id string) float64 { return float64(mustMPID(t, id)) }

// A cancelled payment paid behind the service's back is approved in full.
func TestMPPayBehind(t *testing.T) {
	e := start(t, Options{})
	p := e.mp(t, "POST", "/v1/payments", mpToken, "k1", mpPix(10, "r")).want(t, http.StatusCreated)
	if _, err := e.sim.MPPayBehind(mustMPID(t, p.id())); err == nil {
		t.Fatal("a waiting Pix was paid behind")
	}
	e.mp(t, "PUT", "/v1/payments/"+p.id(), mpToken, "k2", map[string]any{"status": "cancelled"}).want(t, http.StatusOK)
	res, err := e.http.Post(e.url+"/_sim/mp/payments/"+p.id()+"/pay-behind", "application/json", nil)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("pay-behind: %v %v", err, res)
	}
	res.Body.Close()
	if g := e.mp(t, "GET", "/v1/payments/"+p.id(), mpToken, "", nil); g.state() != "approved/accredited" || g.body["captured"] != true {
		t.Fatalf("paid behind: %s", g.raw)
	}
}
