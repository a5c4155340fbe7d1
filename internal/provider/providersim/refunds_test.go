package providersim

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	stripe "github.com/stripe/stripe-go/v76"
)

// refundPage is GET /v1/refunds as Stripe serializes it.
type refundPage struct {
	Object string `json:"object"`
	Data   []struct {
		ID            string            `json:"id"`
		Object        string            `json:"object"`
		Amount        int64             `json:"amount"`
		Status        string            `json:"status"`
		PaymentIntent string            `json:"payment_intent"`
		Metadata      map[string]string `json:"metadata"`
		Created       int64             `json:"created"`
	} `json:"data"`
	HasMore bool   `json:"has_more"`
	URL     string `json:"url"`
}

func (p refundPage) ids() string {
	var ids []string
	for _, rf := range p.Data {
		ids = append(ids, rf.ID)
	}
	return strings.Join(ids, ",")
}

func TestListRefunds(t *testing.T) {
	t.Parallel()
	clock := newClock()
	e := start(t, Options{Now: clock.Now})
	sc := e.client(keyA)

	var pis []*stripe.PaymentIntent
	for i := range 2 {
		pi, err := sc.PaymentIntents.New(authorize("", "pm_card_visa", "automatic", 1000, "pay_"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		pis = append(pis, pi)
	}
	// r[0], r[2], r[3] refund the first intent, r[1] the second.
	var r []*stripe.Refund
	for i, pi := range []*stripe.PaymentIntent{pis[0], pis[1], pis[0], pis[0]} {
		clock.Add(time.Second)
		p := &stripe.RefundParams{PaymentIntent: stripe.String(pi.ID), Amount: stripe.Int64(int64(100 * (i + 1)))}
		p.AddMetadata("refund_id", "ref_"+strconv.Itoa(i))
		re, err := sc.Refunds.New(p)
		if err != nil {
			t.Fatal(err)
		}
		r = append(r, re)
	}
	join := func(rs ...*stripe.Refund) string {
		var ids []string
		for _, rf := range rs {
			ids = append(ids, rf.ID)
		}
		return strings.Join(ids, ",")
	}
	list := func(key string, p *stripe.RefundListParams) ([]*stripe.Refund, error) {
		t.Helper()
		it := e.client(key).Refunds.List(p)
		var got []*stripe.Refund
		for it.Next() {
			got = append(got, it.Refund())
		}
		return got, it.Err()
	}

	// stripe-go's iterator follows has_more with starting_after.
	before := len(e.sim.Requests())
	got, err := list(keyA, &stripe.RefundListParams{PaymentIntent: stripe.String(pis[0].ID), ListParams: stripe.ListParams{Limit: stripe.Int64(2)}})
	if err != nil {
		t.Fatal(err)
	}
	if g, want := join(got...), join(r[3], r[2], r[0]); g != want {
		t.Fatalf("list by intent = %s, want newest first %s", g, want)
	}
	if rf := got[1]; rf.Amount != 300 || rf.Status != stripe.RefundStatusSucceeded || rf.PaymentIntent.ID != pis[0].ID ||
		rf.Metadata["refund_id"] != "ref_2" || rf.Created != r[2].Created || rf.Charge.ID != pis[0].LatestCharge.ID {
		t.Fatalf("listed refund = %+v, want %+v", rf, r[2])
	}
	var pages int
	for _, req := range e.sim.Requests()[before:] {
		if req.Op == "list_refunds" && req.Method == http.MethodGet && req.Path == "/v1/refunds" && req.Status == http.StatusOK {
			pages++
		}
	}
	if pages != 2 {
		t.Fatalf("logged %d list_refunds pages, want 2", pages)
	}

	// Backwards from a cursor: stripe-go yields the nearest first.
	got, err = list(keyA, &stripe.RefundListParams{PaymentIntent: stripe.String(pis[0].ID),
		ListParams: stripe.ListParams{Limit: stripe.Int64(1), EndingBefore: stripe.String(r[0].ID)}})
	if err != nil {
		t.Fatal(err)
	}
	if g, want := join(got...), join(r[2], r[3]); g != want {
		t.Fatalf("ending_before = %s, want %s", g, want)
	}
	got, err = list(keyA, &stripe.RefundListParams{})
	if err != nil || join(got...) != join(r[3], r[2], r[1], r[0]) {
		t.Fatalf("list all = %s, %v", join(got...), err)
	}
	got, err = list(keyA, &stripe.RefundListParams{Charge: stripe.String(pis[1].LatestCharge.ID)})
	if err != nil || join(got...) != join(r[1]) {
		t.Fatalf("list by charge = %s, %v", join(got...), err)
	}

	// The wire shape, page by page.
	page := func(q url.Values) refundPage {
		t.Helper()
		res, body := e.raw(t, "GET", "/v1/refunds?"+q.Encode(), keyA, "", nil)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/refunds?%s = %d %s", q.Encode(), res.StatusCode, body)
		}
		var p refundPage
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatal(err)
		}
		if p.Object != "list" || p.URL != "/v1/refunds" {
			t.Fatalf("list object = %q url %q", p.Object, p.URL)
		}
		return p
	}
	p := page(url.Values{"payment_intent": {pis[0].ID}, "limit": {"2"}})
	if p.ids() != join(r[3], r[2]) || !p.HasMore {
		t.Fatalf("first page = %s has_more %v", p.ids(), p.HasMore)
	}
	if rf := p.Data[0]; rf.Object != "refund" || rf.Amount != 400 || rf.PaymentIntent != pis[0].ID || rf.Metadata["refund_id"] != "ref_3" || rf.Created != r[3].Created {
		t.Fatalf("wire refund = %+v", rf)
	}
	p = page(url.Values{"payment_intent": {pis[0].ID}, "limit": {"2"}, "starting_after": {r[2].ID}})
	if p.ids() != join(r[0]) || p.HasMore {
		t.Fatalf("second page = %s has_more %v", p.ids(), p.HasMore)
	}
	p = page(url.Values{"payment_intent": {pis[0].ID}, "limit": {"1"}, "ending_before": {r[0].ID}})
	if p.ids() != join(r[2]) || !p.HasMore {
		t.Fatalf("ending_before page = %s has_more %v", p.ids(), p.HasMore)
	}
	// A cursor from another intent still marks a place in time.
	p = page(url.Values{"payment_intent": {pis[0].ID}, "starting_after": {r[1].ID}})
	if p.ids() != join(r[0]) {
		t.Fatalf("after the other intent's refund = %s", p.ids())
	}
	if p := page(url.Values{"payment_intent": {pis[1].ID}, "starting_after": {r[1].ID}}); len(p.Data) != 0 || p.HasMore || p.Data == nil {
		t.Fatalf("past the end = %+v", p)
	}

	// Each account lists only its own refunds.
	_, err = list(keyB, &stripe.RefundListParams{PaymentIntent: stripe.String(pis[0].ID)})
	if se := stripeErr(t, err, http.StatusNotFound); se.Code != stripe.ErrorCodeResourceMissing || se.Param != "payment_intent" {
		t.Fatalf("other account's intent: %s %s", se.Code, se.Param)
	}
	if got, err := list(keyB, nil); err != nil || len(got) != 0 {
		t.Fatalf("other account lists %d refunds, %v", len(got), err)
	}

	for _, tc := range []struct {
		q      url.Values
		status int
		param  string
	}{
		{url.Values{"starting_after": {"re_missing"}}, 404, "starting_after"},
		{url.Values{"ending_before": {"re_missing"}}, 404, "ending_before"},
		{url.Values{"charge": {"ch_missing"}}, 404, "charge"},
		{url.Values{"limit": {"0"}}, 400, "limit"},
		{url.Values{"limit": {"101"}}, 400, "limit"},
		{url.Values{"starting_after": {r[0].ID}, "ending_before": {r[1].ID}}, 400, ""},
	} {
		res, body := e.raw(t, "GET", "/v1/refunds?"+tc.q.Encode(), keyA, "", nil)
		if res.StatusCode != tc.status || !strings.Contains(body, `"type":"invalid_request_error"`) ||
			(tc.param != "" && !strings.Contains(body, `"param":"`+tc.param+`"`)) {
			t.Errorf("GET /v1/refunds?%s = %d %s, want %d param %q", tc.q.Encode(), res.StatusCode, body, tc.status, tc.param)
		}
	}
	// Listing is no effect.
	if st := e.sim.StatsFor(keyA); st.Refunds != 4 || st.Authorizations != 2 {
		t.Fatalf("stats = %+v", st)
	}
}
