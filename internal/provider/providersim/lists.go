package providersim

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// listIntents implements GET /v1/payment_intents: the account's intents,
// newest first, filtered by created[gte|gt|lte|lt] (Unix seconds), paged
// by limit (1…100, default 10) and starting_after (older than that
// intent), with has_more, as Stripe lists. expand[]=data.latest_charge
// turns latest_charge into the charge object (amount_refunded, disputed).
func (s *Server) listIntents(a *account, c *call) result {
	limit, sent, perr := positiveInt(c.form, "limit")
	switch {
	case perr != nil || limit > 100:
		return rejected(&apiError{Type: invalidRequest, Code: "parameter_invalid_integer", Param: "limit", Message: "Invalid limit: must be between 1 and 100."})
	case !sent:
		limit = 10
	}
	inRange, perr := createdRange(c.form)
	if perr != nil {
		return rejected(perr)
	}
	from := len(a.order) - 1
	if after := get(c.form, "starting_after"); after != "" {
		at := slices.IndexFunc(a.order, func(pi *intentRecord) bool { return pi.ID == after })
		if at < 0 {
			return notFound("payment_intent", "starting_after", after)
		}
		from = at - 1
	}
	expand := expandsCharge(c.form)
	out := struct {
		Object  string `json:"object"`
		Data    []any  `json:"data"`
		HasMore bool   `json:"has_more"`
		URL     string `json:"url"`
	}{Object: "list", Data: []any{}, URL: "/v1/payment_intents"}
	for i := from; i >= 0; i-- {
		pi := a.order[i]
		if !inRange(pi.Created.Unix()) {
			continue
		}
		if int64(len(out.Data)) == limit {
			out.HasMore = true
			break
		}
		if !expand {
			out.Data = append(out.Data, pi.wire())
			continue
		}
		out.Data = append(out.Data, a.withCharge(pi))
	}
	return okResult(out)
}

// createdRange reads Stripe's created filter: created=T or
// created[gte|gt|lte|lt]=T.
func createdRange(form map[string][]string) (func(int64) bool, *apiError) {
	bounds := map[string]int64{}
	for _, op := range []string{"", "gte", "gt", "lte", "lt"} {
		name := "created"
		if op != "" {
			name += "[" + op + "]"
		}
		v := get(form, name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, &apiError{Type: invalidRequest, Code: "parameter_invalid_integer", Param: name, Message: "Invalid integer: " + v}
		}
		bounds[op] = n
	}
	return func(t int64) bool {
		for op, b := range bounds {
			if (op == "" && t != b) || (op == "gte" && t < b) || (op == "gt" && t <= b) || (op == "lte" && t > b) || (op == "lt" && t >= b) {
				return false
			}
		}
		return true
	}, nil
}

// expandsCharge reports whether expand[] (or expand[n], as stripe-go
// sends it) asks for data.latest_charge.
func expandsCharge(form map[string][]string) bool {
	for k, vs := range form {
		if strings.HasPrefix(k, "expand[") && slices.Contains(vs, "data.latest_charge") {
			return true
		}
	}
	return false
}

// listedChargeJSON is a Charge as an expanded latest_charge shows it.
type listedChargeJSON struct {
	chargeJSON
	Captured bool   `json:"captured"`
	Disputed bool   `json:"disputed"`
	Status   string `json:"status"`
}

// withCharge is the intent with latest_charge expanded. Requires s.mu.
func (a *account) withCharge(pi *intentRecord) any {
	j := pi.wire()
	if pi.LatestCharge == "" {
		return j
	}
	ch := &listedChargeJSON{chargeJSON: chargeJSON{ID: pi.LatestCharge, Object: "charge", Amount: pi.Amount,
		AmountCaptured: pi.AmountReceived, AmountRefunded: pi.AmountRefunded, Currency: pi.Currency,
		PaymentIntent: pi.ID, Refunded: pi.AmountReceived > 0 && pi.AmountRefunded == pi.AmountReceived},
		Captured: pi.AmountReceived > 0, Status: "succeeded"}
	ch.Disputed = slices.ContainsFunc(a.disputes, func(d *dispute) bool { return d.IntentID == pi.ID })
	return struct {
		*intentJSON
		LatestCharge *listedChargeJSON `json:"latest_charge"`
	}{j, ch}
}

// mpDateRange reads the range filter of Mercado Pago's payment search:
// range=date_created|date_last_updated|date_approved with begin_date and
// end_date (RFC 3339; both inclusive). ok is false for a bad value.
func mpDateRange(form map[string][]string) (in func(p *mpPayment) bool, ok bool) {
	field := get(form, "range")
	if field == "" {
		return func(*mpPayment) bool { return true }, true
	}
	at := map[string]func(p *mpPayment) time.Time{
		"date_created":      func(p *mpPayment) time.Time { return p.Created },
		"date_last_updated": func(p *mpPayment) time.Time { return p.updated },
		"date_approved":     func(p *mpPayment) time.Time { return p.approved },
	}[field]
	if at == nil {
		return nil, false
	}
	var begin, end time.Time
	var err error
	if v := get(form, "begin_date"); v != "" {
		if begin, err = time.Parse(time.RFC3339, v); err != nil {
			return nil, false
		}
	}
	if v := get(form, "end_date"); v != "" {
		if end, err = time.Parse(time.RFC3339, v); err != nil {
			return nil, false
		}
	}
	return func(p *mpPayment) bool {
		t := at(p)
		return !t.IsZero() && !t.Before(begin) && (end.IsZero() || !t.After(end))
	}, true
}
