package providersim

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Intent is a snapshot of a stored PaymentIntent.
type Intent struct {
	ID               string            `json:"id"`
	Status           string            `json:"status"` // requires_payment_method, requires_confirmation, requires_action, processing, requires_capture, succeeded, canceled
	Amount           int64             `json:"amount"`
	AmountCapturable int64             `json:"amount_capturable"`
	AmountReceived   int64             `json:"amount_received"`
	AmountRefunded   int64             `json:"amount_refunded"`
	Currency         string            `json:"currency"`
	CaptureMethod    string            `json:"capture_method"`
	PaymentMethod    string            `json:"payment_method,omitempty"`
	Customer         string            `json:"customer,omitempty"`
	Description      string            `json:"description,omitempty"`
	LatestCharge     string            `json:"latest_charge,omitempty"`
	Metadata         map[string]string `json:"metadata"`
	IdempotencyKey   string            `json:"idempotency_key,omitempty"` // of the request that created it
	Created          time.Time         `json:"created"`
	MethodType       string            `json:"payment_method_type"`        // card, pix or boleto
	NextActionType   string            `json:"next_action_type,omitempty"` // while requires_action
	ExpiresAt        *time.Time        `json:"expires_at,omitempty"`       // Pix and Boleto
	// ClientSecret is what a customer's page holds to confirm the intent.
	ClientSecret string `json:"client_secret"`
}

type intentRecord struct {
	Intent
	clientSecret       string
	canceledAt         time.Time
	cancellationReason string
	lastError          *apiError
	methodTypes        []string
	nextAction         *nextActionJSON
	returnURL          string // where the 3-D Secure page sends the customer back
	pixData            string
	boletoNumber       string
	billingName        string
}

// intentJSON is a PaymentIntent as Stripe serializes it (the fields stripe-go
// reads that matter here; absent objects are null, as in Stripe).
type intentJSON struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	AmountCapturable   int64             `json:"amount_capturable"`
	AmountReceived     int64             `json:"amount_received"`
	CanceledAt         *int64            `json:"canceled_at"`
	CancellationReason *string           `json:"cancellation_reason"`
	CaptureMethod      string            `json:"capture_method"`
	ClientSecret       string            `json:"client_secret"`
	ConfirmationMethod string            `json:"confirmation_method"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	Customer           *string           `json:"customer"`
	Description        *string           `json:"description"`
	LastPaymentError   *apiError         `json:"last_payment_error"`
	LatestCharge       *string           `json:"latest_charge"`
	Livemode           bool              `json:"livemode"`
	Metadata           map[string]string `json:"metadata"`
	NextAction         *nextActionJSON   `json:"next_action"`
	PaymentMethod      *string           `json:"payment_method"`
	PaymentMethodTypes []string          `json:"payment_method_types"`
	Status             string            `json:"status"`
}

func (pi *intentRecord) wire() *intentJSON {
	j := &intentJSON{
		ID: pi.ID, Object: "payment_intent", Amount: pi.Amount, AmountCapturable: pi.AmountCapturable,
		AmountReceived: pi.AmountReceived, CancellationReason: nullable(pi.cancellationReason),
		CaptureMethod: pi.CaptureMethod, ClientSecret: pi.clientSecret, ConfirmationMethod: "automatic",
		Created: pi.Created.Unix(), Currency: pi.Currency, Customer: nullable(pi.Customer),
		Description: nullable(pi.Description), LastPaymentError: pi.lastError,
		LatestCharge: nullable(pi.LatestCharge), Metadata: pi.Metadata, NextAction: pi.nextAction,
		PaymentMethod: nullable(pi.PaymentMethod), PaymentMethodTypes: pi.methodTypes, Status: pi.Status,
	}
	if !pi.canceledAt.IsZero() {
		t := pi.canceledAt.Unix()
		j.CanceledAt = &t
	}
	return j
}

// refund is a Refund as Stripe serializes it; it never changes once made.
type refund struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	BalanceTransaction *string           `json:"balance_transaction"`
	Charge             string            `json:"charge"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	Metadata           map[string]string `json:"metadata"`
	PaymentIntent      string            `json:"payment_intent"`
	Reason             *string           `json:"reason"`
	Status             string            `json:"status"`
}

// Stripe error types.
const (
	apiErrorType     = "api_error"
	cardError        = "card_error"
	idempotencyError = "idempotency_error"
	invalidRequest   = "invalid_request_error"
)

// apiError is the body of Stripe's {"error": ...} answers and of
// last_payment_error.
type apiError struct {
	Type          string      `json:"type"`
	Code          string      `json:"code,omitempty"`
	DeclineCode   string      `json:"decline_code,omitempty"`
	Message       string      `json:"message"`
	Param         string      `json:"param,omitempty"`
	Charge        string      `json:"charge,omitempty"`
	DocURL        string      `json:"doc_url,omitempty"`
	PaymentIntent *intentJSON `json:"payment_intent,omitempty"`
}

func jsonResult(status int, v any, final bool) result {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own types are marshalled
	}
	return result{status: status, body: append(b, '\n'), final: final}
}

func okResult(v any) result { return jsonResult(http.StatusOK, v, true) }

// failed is an error answer once execution began; it is kept for replays.
func failed(status int, e *apiError) result {
	if e.Code != "" && e.DocURL == "" {
		e.DocURL = "https://stripe.com/docs/error-codes/" + strings.ReplaceAll(e.Code, "_", "-")
	}
	return jsonResult(status, map[string]*apiError{"error": e}, true)
}

// rejected is a 400 for malformed parameters; like Stripe, it is not kept,
// so a corrected retry with the same key executes.
func rejected(e *apiError) result {
	res := failed(http.StatusBadRequest, e)
	res.final = false
	return res
}

func missingParam(name string) *apiError {
	return &apiError{Type: invalidRequest, Code: "parameter_missing", Param: name, Message: "Missing required param: " + name + "."}
}

func notFound(kind, param, id string) result {
	return failed(http.StatusNotFound, &apiError{Type: invalidRequest, Code: "resource_missing", Param: param,
		Message: "No such " + kind + ": '" + id + "'"})
}

// unexpectedState answers an operation the intent's status does not allow.
func unexpectedState(pi *intentRecord, verb, allowed string) result {
	return failed(http.StatusBadRequest, &apiError{Type: invalidRequest, Code: "payment_intent_unexpected_state",
		Message: "This PaymentIntent could not be " + verb + " because it has a status of " + pi.Status +
			". Only a PaymentIntent with one of the following statuses may be " + verb + ": " + allowed + ".",
		PaymentIntent: pi.wire()})
}

// positiveInt reads an optional positive integer parameter.
func positiveInt(form map[string][]string, name string) (v int64, sent bool, err *apiError) {
	vals, sent := form[name]
	if !sent {
		return 0, false, nil
	}
	v, perr := strconv.ParseInt(vals[0], 10, 64)
	if perr != nil || v < 1 {
		return 0, true, &apiError{Type: invalidRequest, Code: "parameter_invalid_integer", Param: name,
			Message: "Invalid positive integer: " + vals[0]}
	}
	return v, true, nil
}

func get(form map[string][]string, name string) string {
	if v := form[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// metadataParam collects metadata[key]=value parameters.
func metadataParam(form map[string][]string) map[string]string {
	md := map[string]string{}
	for k, v := range form {
		if key, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(key, "]") && v[0] != "" {
			md[strings.TrimSuffix(key, "]")] = v[0]
		}
	}
	return md
}

// decline describes a test payment method that is declined.
type decline struct{ code, declineCode, message string }

// testPaymentMethods are Stripe's test payment methods; nil means approved.
var testPaymentMethods = map[string]*decline{
	"pm_card_visa":                            nil,
	"pm_card_mastercard":                      nil,
	"pm_card_amex":                            nil,
	"pm_card_chargeDeclined":                  {"card_declined", "generic_decline", "Your card was declined."},
	"pm_card_chargeDeclinedInsufficientFunds": {"card_declined", "insufficient_funds", "Your card has insufficient funds."},
	"pm_card_chargeDeclinedFraudulent":        {"card_declined", "fraudulent", "Your card was declined."},
	"pm_card_chargeDeclinedExpiredCard":       {"expired_card", "expired_card", "Your card has expired."},
}

var currencyRE = regexp.MustCompile(`^[a-z]{3}$`)

// intentParams is the checked parameters of a PaymentIntent create.
type intentParams struct {
	amount                  int64
	currency, captureMethod string
	confirm                 bool
	pm, pmType              string // payment_method, payment_method_data[type]
	methodType              string
	methodTypes             []string
	details                 *asyncDetails // of payment_method_data
	returnURL               string
}

// intentParamsOf checks a create's form, in Stripe's order of complaints.
func intentParamsOf(form map[string][]string) (*intentParams, *apiError) {
	amount, sent, perr := positiveInt(form, "amount")
	if perr == nil && !sent {
		perr = missingParam("amount")
	}
	if perr != nil {
		return nil, perr
	}
	p := &intentParams{amount: amount, currency: strings.ToLower(get(form, "currency"))}
	switch {
	case p.currency == "":
		return nil, missingParam("currency")
	case !currencyRE.MatchString(p.currency):
		return nil, &apiError{Type: invalidRequest, Param: "currency", Message: "Invalid currency: " + p.currency + "."}
	}
	p.captureMethod = get(form, "capture_method")
	switch p.captureMethod {
	case "":
		p.captureMethod = "automatic"
	case "automatic", "automatic_async", "manual":
	default:
		return nil, &apiError{Type: invalidRequest, Param: "capture_method",
			Message: "Invalid capture_method: must be one of automatic, automatic_async, or manual"}
	}
	p.confirm, _ = strconv.ParseBool(get(form, "confirm"))
	if perr := p.readMethod(form); perr != nil {
		return nil, perr
	}
	p.returnURL = get(form, "return_url")
	if p.returnURL != "" && !p.confirm {
		return nil, &apiError{Type: invalidRequest, Param: "return_url",
			Message: "You may only specify a return_url when confirm is true."}
	}
	return p, nil
}

// readMethod reads the payment method: a test one by name or the data of
// an asynchronous one, and the types the intent allows.
func (p *intentParams) readMethod(form map[string][]string) *apiError {
	p.pm = get(form, "payment_method")
	p.pmType = get(form, "payment_method_data[type]")
	_, known := testPaymentMethods[p.pm]
	challenge := challengePaymentMethods[p.pm]
	switch {
	case p.pm != "" && p.pmType != "":
		return &apiError{Type: invalidRequest, Param: "payment_method_data",
			Message: "You cannot specify both payment_method and payment_method_data."}
	case p.pm != "" && !known && !challenge:
		return &apiError{Type: invalidRequest, Code: "resource_missing", Param: "payment_method",
			Message: "No such PaymentMethod: '" + p.pm + "'"}
	case p.confirm && p.pm == "" && p.pmType == "":
		return missingParam("payment_method")
	}
	p.methodType = "card"
	if p.pmType != "" {
		var perr *apiError
		if p.details, perr = asyncParams(form, p.pmType, p.currency, p.captureMethod); perr != nil {
			return perr
		}
		p.methodType = p.pmType
	}
	p.methodTypes = form["payment_method_types[]"]
	if len(p.methodTypes) == 0 {
		p.methodTypes = []string{p.methodType}
	} else if !slices.Contains(p.methodTypes, p.methodType) {
		return &apiError{Type: invalidRequest, Param: "payment_method_types",
			Message: "The PaymentMethod provided (" + p.methodType + ") is not allowed for this PaymentIntent. Allowed types: " +
				strings.Join(p.methodTypes, ", ") + "."}
	}
	return nil
}

func (s *Server) createIntent(a *account, c *call) result {
	p, perr := intentParamsOf(c.form)
	if perr != nil {
		return rejected(perr)
	}
	pi := &intentRecord{Intent: Intent{
		ID: newID("pi_", 24), Amount: p.amount, Currency: p.currency, CaptureMethod: p.captureMethod,
		PaymentMethod: p.pm, Customer: get(c.form, "customer"), Description: get(c.form, "description"),
		Metadata: metadataParam(c.form), IdempotencyKey: c.idemKey, Created: c.now, MethodType: p.methodType,
	}, methodTypes: p.methodTypes, returnURL: p.returnURL}
	pi.clientSecret = pi.ID + "_secret_" + newID("", 25)
	pi.ClientSecret = pi.clientSecret
	if p.details != nil {
		// Stripe makes a PaymentMethod of the payment_method_data.
		pi.PaymentMethod, pi.billingName = newID("pm_", 24), p.details.name
	}
	a.intents[pi.ID] = pi
	a.order = append(a.order, pi)

	switch {
	case !p.confirm && p.pm == "" && p.pmType == "":
		pi.Status = "requires_payment_method"
	case !p.confirm:
		pi.Status = "requires_confirmation"
	case p.details != nil:
		s.startVoucher(a, pi, p.details, c)
	default:
		return s.confirmCard(a, pi, c)
	}
	return okResult(pi.wire())
}

// confirmCard confirms an intent with its card payment method: a 3-D
// Secure challenge, a decline or an authorization. Requires s.mu.
func (s *Server) confirmCard(a *account, pi *intentRecord, c *call) result {
	pi.lastError = nil
	dec := testPaymentMethods[pi.PaymentMethod]
	switch {
	case challengePaymentMethods[pi.PaymentMethod]:
		s.startChallenge(a, pi, c)
	case dec != nil:
		// Stripe keeps the declined intent, detaches the card and reports the
		// intent inside the error. The intent can be confirmed again, with
		// its client_secret, until it is canceled.
		pi.Status, pi.PaymentMethod, pi.LatestCharge = "requires_payment_method", "", newID("ch_", 24)
		pi.nextAction, pi.NextActionType = nil, ""
		pi.lastError = &apiError{Type: cardError, Code: dec.code, DeclineCode: dec.declineCode,
			Message: dec.message, Charge: pi.LatestCharge,
			DocURL: "https://stripe.com/docs/error-codes/" + strings.ReplaceAll(dec.code, "_", "-")}
		a.stats.Declines++
		s.emit(a, "payment_intent.payment_failed", pi, c.now)
		e := *pi.lastError
		e.PaymentIntent = pi.wire()
		return failed(http.StatusPaymentRequired, &e)
	default:
		s.authorize(a, pi, c.now)
	}
	return okResult(pi.wire())
}

// confirmable are the statuses Stripe confirms a PaymentIntent from.
var confirmable = []string{"requires_payment_method", "requires_confirmation", "requires_action"}

// confirmIntent implements POST /v1/payment_intents/{id}/confirm with a
// card payment method, as a server (secret key) or a customer's browser
// (publishable key and client_secret, see publishable) calls it. An
// intent that was declined or failed 3-D Secure is payable this way until
// it is canceled.
func (s *Server) confirmIntent(a *account, c *call) result {
	pi := a.intents[c.id]
	if pi == nil {
		return notFound("payment_intent", "intent", c.id)
	}
	if cs := get(c.form, "client_secret"); cs != "" && cs != pi.clientSecret {
		return rejected(badClientSecret())
	}
	if !slices.Contains(confirmable, pi.Status) {
		return unexpectedState(pi, "confirmed", strings.Join(confirmable, ", "))
	}
	pm := get(c.form, "payment_method")
	if pm == "" {
		pm = pi.PaymentMethod
	}
	_, known := testPaymentMethods[pm]
	switch {
	case pm == "":
		return rejected(missingParam("payment_method"))
	case !known && !challengePaymentMethods[pm]:
		return rejected(&apiError{Type: invalidRequest, Code: "resource_missing", Param: "payment_method",
			Message: "No such PaymentMethod: '" + pm + "'"})
	case !slices.Contains(pi.methodTypes, "card"):
		return rejected(&apiError{Type: invalidRequest, Param: "payment_method",
			Message: "The PaymentMethod provided (card) is not allowed for this PaymentIntent. Allowed types: " +
				strings.Join(pi.methodTypes, ", ") + "."})
	}
	if u := get(c.form, "return_url"); u != "" {
		pi.returnURL = u
	}
	pi.PaymentMethod, pi.MethodType = pm, "card"
	return s.confirmCard(a, pi, c)
}

func badClientSecret() *apiError {
	return &apiError{Type: invalidRequest, Param: "client_secret",
		Message: "The client_secret provided does not match any associated PaymentIntent on this account."}
}

// publishable lets a customer's browser confirm with a publishable key
// (pk_) and the intent's client_secret, as Stripe.js does: the request
// then acts for the secret key that made the intent.
func (s *Server) publishable(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !strings.HasPrefix(strings.TrimSpace(bearer), "pk_") {
			next.ServeHTTP(w, r)
			return
		}
		secret := r.PostFormValue("client_secret")
		s.mu.Lock()
		a, pi := s.findIntent(r.PathValue("id"))
		ok := pi != nil && secret != "" && secret == pi.clientSecret
		s.mu.Unlock()
		if !ok {
			s.reply(w, &Request{Op: "confirm", Method: r.Method, Path: r.URL.Path, Time: s.Now()}, rejected(badClientSecret()))
			return
		}
		r.Header.Set("Authorization", "Bearer "+a.key)
		next.ServeHTTP(w, r)
	})
}

// authorize completes a card payment: held for capture or charged.
// Requires s.mu.
func (s *Server) authorize(a *account, pi *intentRecord, now time.Time) {
	pi.nextAction, pi.NextActionType, pi.LatestCharge = nil, "", newID("ch_", 24)
	a.stats.Authorizations++
	if pi.CaptureMethod == "manual" {
		pi.Status, pi.AmountCapturable = "requires_capture", pi.Amount
		s.emit(a, "payment_intent.amount_capturable_updated", pi, now)
		return
	}
	pi.Status, pi.AmountReceived = "succeeded", pi.Amount
	s.emit(a, "payment_intent.succeeded", pi, now)
}

func (s *Server) getIntent(a *account, c *call) result {
	pi := a.intents[c.id]
	if pi == nil {
		return notFound("payment_intent", "intent", c.id)
	}
	return okResult(pi.wire())
}

func (s *Server) captureIntent(a *account, c *call) result {
	amount, sent, perr := positiveInt(c.form, "amount_to_capture")
	if perr != nil {
		return rejected(perr)
	}
	pi := a.intents[c.id]
	switch {
	case pi == nil:
		return notFound("payment_intent", "intent", c.id)
	case pi.Status != "requires_capture":
		return unexpectedState(pi, "captured", "requires_capture")
	case !sent:
		amount = pi.AmountCapturable
	case amount > pi.AmountCapturable:
		return failed(http.StatusBadRequest, &apiError{Type: invalidRequest, Code: "amount_too_large", Param: "amount_to_capture",
			Message: "The amount to capture must be less than or equal to the amount capturable (" + strconv.FormatInt(pi.AmountCapturable, 10) + ")."})
	}
	// Capturing less than authorized releases the rest, as Stripe does.
	pi.Status, pi.AmountReceived, pi.AmountCapturable = "succeeded", amount, 0
	a.stats.Captures++
	s.emit(a, "payment_intent.succeeded", pi, c.now)
	return okResult(pi.wire())
}

// cancelable are the statuses Stripe lets a PaymentIntent be canceled from.
var cancelable = []string{"requires_payment_method", "requires_capture", "requires_confirmation", "requires_action", "processing"}

func (s *Server) cancelIntent(a *account, c *call) result {
	pi := a.intents[c.id]
	switch {
	case pi == nil:
		return notFound("payment_intent", "intent", c.id)
	case !slices.Contains(cancelable, pi.Status):
		return unexpectedState(pi, "canceled", strings.Join(cancelable, ", "))
	}
	pi.Status, pi.AmountCapturable, pi.canceledAt = "canceled", 0, c.now
	pi.nextAction, pi.NextActionType = nil, ""
	delete(a.waiting, pi.ID)
	pi.cancellationReason = get(c.form, "cancellation_reason")
	a.stats.Cancels++
	s.emit(a, "payment_intent.canceled", pi, c.now)
	return okResult(pi.wire())
}

func (s *Server) createRefund(a *account, c *call) result {
	id := get(c.form, "payment_intent")
	if id == "" {
		return rejected(missingParam("payment_intent"))
	}
	amount, sent, perr := positiveInt(c.form, "amount")
	if perr != nil {
		return rejected(perr)
	}
	pi := a.intents[id]
	if pi == nil {
		return notFound("payment_intent", "payment_intent", id)
	}
	remaining := pi.AmountReceived - pi.AmountRefunded
	switch {
	case pi.Status != "succeeded":
		return failed(http.StatusBadRequest, &apiError{Type: invalidRequest, Code: "payment_intent_unexpected_state", Param: "payment_intent",
			Message: "This PaymentIntent (" + id + ") does not have a successful charge to refund."})
	case remaining == 0:
		return failed(http.StatusBadRequest, &apiError{Type: invalidRequest, Code: "charge_already_refunded",
			Message: "Charge " + pi.LatestCharge + " has already been refunded.", Charge: pi.LatestCharge})
	case !sent:
		amount = remaining
	case amount > remaining:
		return failed(http.StatusBadRequest, &apiError{Type: invalidRequest, Code: "amount_too_large", Param: "amount",
			Message: "Refund amount (" + strconv.FormatInt(amount, 10) + ") is greater than unrefunded amount on charge (" + strconv.FormatInt(remaining, 10) + ")"})
	}
	rf := &refund{ID: newID("re_", 24), Object: "refund", Amount: amount, Charge: pi.LatestCharge,
		Created: c.now.Unix(), Currency: pi.Currency, Metadata: metadataParam(c.form),
		PaymentIntent: pi.ID, Status: "succeeded"}
	a.refunds[rf.ID] = rf
	a.refundOrder = append(a.refundOrder, rf)
	pi.AmountRefunded += amount
	a.stats.Refunds++
	return okResult(rf)
}

func (s *Server) getRefund(a *account, c *call) result {
	rf := a.refunds[c.id]
	if rf == nil {
		return notFound("refund", "refund", c.id)
	}
	return okResult(rf)
}

// listRefunds implements GET /v1/refunds: the account's refunds, optionally
// of one payment_intent or charge, newest first, paged by the cursors
// starting_after (older than) and ending_before (newer than).
func (s *Server) listRefunds(a *account, c *call) result {
	limit, sent, perr := positiveInt(c.form, "limit")
	switch {
	case perr != nil || limit > 100:
		return rejected(&apiError{Type: invalidRequest, Code: "parameter_invalid_integer", Param: "limit", Message: "Invalid limit: must be between 1 and 100."})
	case !sent:
		limit = 10
	}
	piID, charge := get(c.form, "payment_intent"), get(c.form, "charge")
	if piID != "" && a.intents[piID] == nil {
		return notFound("payment_intent", "payment_intent", piID)
	}
	if charge != "" && !a.hasCharge(charge) {
		return notFound("charge", "charge", charge)
	}
	after, before := get(c.form, "starting_after"), get(c.form, "ending_before")
	if after != "" && before != "" {
		return rejected(&apiError{Type: invalidRequest, Message: "You may only specify one of these parameters: ending_before, starting_after."})
	}

	// Walk away from the cursor: towards older refunds for starting_after
	// and for the first page, towards newer ones for ending_before.
	from, step := len(a.refundOrder)-1, -1
	if cursor := after + before; cursor != "" {
		param := "starting_after"
		if before != "" {
			param = "ending_before"
		}
		at := slices.IndexFunc(a.refundOrder, func(rf *refund) bool { return rf.ID == cursor })
		if at < 0 {
			return notFound("refund", param, cursor)
		}
		from = at - 1
		if before != "" {
			from, step = at+1, 1
		}
	}
	out := struct {
		Object  string    `json:"object"`
		Data    []*refund `json:"data"`
		HasMore bool      `json:"has_more"`
		URL     string    `json:"url"`
	}{Object: "list", Data: []*refund{}, URL: "/v1/refunds"}
	for i := from; i >= 0 && i < len(a.refundOrder); i += step {
		rf := a.refundOrder[i]
		if (piID != "" && rf.PaymentIntent != piID) || (charge != "" && rf.Charge != charge) {
			continue
		}
		if int64(len(out.Data)) == limit {
			out.HasMore = true
			break
		}
		out.Data = append(out.Data, rf)
	}
	if step > 0 {
		slices.Reverse(out.Data) // a page is newest first whichever way it was walked
	}
	return okResult(out)
}

// hasCharge reports whether a charge of the account exists. Requires s.mu.
func (a *account) hasCharge(id string) bool {
	for _, pi := range a.order {
		if pi.LatestCharge == id {
			return true
		}
	}
	return false
}

// searchClauseRE matches one clause of the supported search query subset:
// metadata['key']:'value' or status:'value' (either quote style).
var searchClauseRE = regexp.MustCompile(`^(?:metadata\[['"]([^'"]+)['"]\]|(status|currency)):['"]([^'"]*)['"]$`)

// searchIntents implements GET /v1/payment_intents/search for clauses joined
// with AND, newest first, paged by offset.
func (s *Server) searchIntents(a *account, c *call) result {
	query := strings.TrimSpace(get(c.form, "query"))
	if query == "" {
		return rejected(missingParam("query"))
	}
	var preds []func(*intentRecord) bool
	for _, clause := range strings.Split(query, " AND ") {
		m := searchClauseRE.FindStringSubmatch(strings.TrimSpace(clause))
		if m == nil {
			return rejected(&apiError{Type: invalidRequest, Param: "query", Message: "Unsupported search query clause: " + clause})
		}
		key, field, want := m[1], m[2], m[3]
		preds = append(preds, func(pi *intentRecord) bool {
			switch field {
			case "status":
				return pi.Status == want
			case "currency":
				return pi.Currency == want
			}
			return pi.Metadata[key] == want
		})
	}
	limit, offset := int64(10), 0
	if v, sent, perr := positiveInt(c.form, "limit"); perr != nil || v > 100 {
		return rejected(&apiError{Type: invalidRequest, Code: "parameter_invalid_integer", Param: "limit", Message: "Invalid limit: must be between 1 and 100."})
	} else if sent {
		limit = v
	}
	if p := get(c.form, "page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return rejected(&apiError{Type: invalidRequest, Param: "page", Message: "Invalid page: " + p})
		}
		offset = n
	}

	out := struct {
		Object   string        `json:"object"`
		Data     []*intentJSON `json:"data"`
		HasMore  bool          `json:"has_more"`
		NextPage *string       `json:"next_page"`
		URL      string        `json:"url"`
	}{Object: "search_result", Data: []*intentJSON{}, URL: "/v1/payment_intents/search"}
	matched := 0
	for i := len(a.order) - 1; i >= 0; i-- {
		pi := a.order[i]
		if (s.opts.SearchLag > 0 && c.now.Sub(pi.Created) < s.opts.SearchLag) || !all(preds, pi) {
			continue
		}
		if matched++; matched <= offset {
			continue
		}
		if int64(len(out.Data)) == limit {
			out.HasMore = true
			out.NextPage = nullable(strconv.Itoa(offset + int(limit)))
			break
		}
		out.Data = append(out.Data, pi.wire())
	}
	return okResult(out)
}

func all(preds []func(*intentRecord) bool, pi *intentRecord) bool {
	for _, p := range preds {
		if !p(pi) {
			return false
		}
	}
	return true
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID makes a Stripe-looking identifier such as pi_3MtwBwLkdIwHu7ix28a3tqPa.
func newID(prefix string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = idAlphabet[rand.IntN(len(idAlphabet))]
	}
	return prefix + string(b)
}
