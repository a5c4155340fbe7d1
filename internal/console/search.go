package console

import (
	"net/http"
	"strings"
	"time"

	"github.com/acmepay/payments/internal/payment"
)

// SearchHit is a payment found by the console's search.
type SearchHit struct {
	ID        string
	AccountID string
	OrderID   string
	Status    payment.Status
	Amount    int64
	Currency  string
	Provider  string
	CreatedAt time.Time
	// ByRequestID: found because a request with that id acted on it.
	ByRequestID bool
}

const searchLimit = 50

// search finds a payment by its id, its order id, its provider id or the
// request id of a request about it. A payment id opens the payment; other
// terms list what matches, newest first.
func (c *Console) search(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	d := pageData{Title: "Search", Nav: "search", Query: q}
	if q == "" {
		c.render(w, r, http.StatusOK, "search", d)
		return
	}
	if len(q) > 255 || !payment.ValidText(q) {
		d.Error = "Search for a payment id, an order id, a provider id or a request id (at most 255 characters)."
		c.render(w, r, http.StatusBadRequest, "search", d)
		return
	}
	if strings.HasPrefix(q, "pay_") {
		if _, err := c.cfg.Operations.AdminGet(ctx, q); err == nil {
			http.Redirect(w, r, "/console/payments/"+q, http.StatusSeeOther)
			return
		} else if payment.ErrorCode(err) != payment.CodeNotFound {
			c.fail(w, r, err)
			return
		}
	}
	hits, err := c.cfg.Store.ConsolePaymentSearch(ctx, q, searchLimit)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d.Hits, d.Searched = hits, true
	c.render(w, r, http.StatusOK, "search", d)
}
