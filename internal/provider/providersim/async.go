package providersim

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// challengePaymentMethods are Stripe's test cards that always ask for 3-D
// Secure authentication.
var challengePaymentMethods = map[string]bool{
	"pm_card_threeDSecure2Required":  true,
	"pm_card_authenticationRequired": true,
}

// nextActionJSON is a PaymentIntent's next_action, as Stripe serializes it.
type nextActionJSON struct {
	Type                 string            `json:"type"`
	RedirectToURL        *redirectJSON     `json:"redirect_to_url,omitempty"`
	UseStripeSDK         map[string]string `json:"use_stripe_sdk,omitempty"`
	PixDisplayQRCode     *pixJSON          `json:"pix_display_qr_code,omitempty"`
	BoletoDisplayDetails *boletoJSON       `json:"boleto_display_details,omitempty"`
}

type redirectJSON struct {
	URL       string `json:"url"`
	ReturnURL string `json:"return_url"`
}

type pixJSON struct {
	Data                  string `json:"data"`
	ExpiresAt             int64  `json:"expires_at"`
	HostedInstructionsURL string `json:"hosted_instructions_url"`
	ImageURLPNG           string `json:"image_url_png"`
	ImageURLSVG           string `json:"image_url_svg"`
}

type boletoJSON struct {
	ExpiresAt        int64  `json:"expires_at"`
	HostedVoucherURL string `json:"hosted_voucher_url"`
	Number           string `json:"number"`
	PDF              string `json:"pdf"`
}

// asyncDetails are the checked payment_method_data of a Pix or Boleto.
type asyncDetails struct {
	name      string
	expiresIn time.Duration // Pix
	days      int           // Boleto
}

// saoPaulo is Brasília time; Brazil has had no daylight saving since 2019.
var saoPaulo = time.FixedZone("BRT", -3*60*60)

// asyncParams checks the parameters Stripe requires of a Pix or Boleto.
func asyncParams(form map[string][]string, pmType, currency, captureMethod string) (*asyncDetails, *apiError) {
	if pmType != "pix" && pmType != "boleto" {
		return nil, &apiError{Type: invalidRequest, Param: "payment_method_data[type]",
			Message: "Invalid payment_method_data[type]: the simulator knows pix and boleto."}
	}
	if currency != "brl" {
		return nil, &apiError{Type: invalidRequest, Param: "currency",
			Message: "The currency provided (" + currency + ") is invalid. Payments with " + pmType + " support the following currencies: brl."}
	}
	if captureMethod == "manual" {
		return nil, &apiError{Type: invalidRequest, Param: "capture_method",
			Message: "The PaymentMethod type " + pmType + " does not support manual capture."}
	}
	d := &asyncDetails{name: get(form, "payment_method_data[billing_details][name]")}
	if pmType == "pix" {
		d.expiresIn = 86400 * time.Second
		name := "payment_method_options[pix][expires_after_seconds]"
		if v, sent, perr := positiveInt(form, name); perr != nil || (sent && (v < 10 || v > 1209600)) {
			return nil, &apiError{Type: invalidRequest, Code: "parameter_invalid_integer", Param: name,
				Message: "Invalid " + name + ": must be between 10 and 1209600."}
		} else if sent {
			d.expiresIn = time.Duration(v) * time.Second
		}
		return d, nil
	}
	for _, f := range []string{"name", "email", "address][line1", "address][city", "address][state",
		"address][postal_code", "address][country"} {
		if name := "payment_method_data[billing_details][" + f + "]"; get(form, name) == "" {
			return nil, missingParam(name)
		}
	}
	const taxParam = "payment_method_data[boleto][tax_id]"
	switch digits := strings.Map(keepDigit, get(form, taxParam)); {
	case get(form, taxParam) == "":
		return nil, missingParam(taxParam)
	case len(digits) != 11 && len(digits) != 14:
		return nil, &apiError{Type: invalidRequest, Code: "parameter_invalid_string", Param: taxParam,
			Message: "Invalid tax_id: a CPF has 11 digits and a CNPJ 14."}
	}
	d.days = 3
	name := "payment_method_options[boleto][expires_after_days]"
	if v, sent, perr := positiveInt(form, name); perr != nil || v > 60 {
		return nil, &apiError{Type: invalidRequest, Code: "parameter_invalid_integer", Param: name,
			Message: "Invalid " + name + ": must be between 1 and 60."}
	} else if sent {
		d.days = int(v)
	}
	return d, nil
}

func keepDigit(r rune) rune {
	if r >= '0' && r <= '9' {
		return r
	}
	return -1
}

// startVoucher puts a Pix or Boleto intent in requires_action with its QR
// code or voucher. Requires s.mu.
func (s *Server) startVoucher(a *account, pi *intentRecord, d *asyncDetails, c *call) {
	pi.Status = "requires_action"
	var expires time.Time
	if pi.MethodType == "pix" {
		expires = c.now.Add(d.expiresIn)
		pi.pixData = pixPayload(pi)
		page := c.base + "/_sim/pix/" + pi.ID
		pi.nextAction = &nextActionJSON{Type: "pix_display_qr_code", PixDisplayQRCode: &pixJSON{
			Data: pi.pixData, ExpiresAt: expires.Unix(), HostedInstructionsURL: page,
			ImageURLPNG: page + "/qr.png", ImageURLSVG: page + "/qr.svg"}}
	} else {
		// Stripe: the voucher is due at 23:59 in São Paulo, days calendar days on.
		local := c.now.In(saoPaulo)
		expires = time.Date(local.Year(), local.Month(), local.Day()+d.days, 23, 59, 59, 0, saoPaulo)
		pi.boletoNumber = boletoNumber()
		page := c.base + "/_sim/boleto/" + pi.ID
		pi.nextAction = &nextActionJSON{Type: "boleto_display_details", BoletoDisplayDetails: &boletoJSON{
			ExpiresAt: expires.Unix(), HostedVoucherURL: page, Number: pi.boletoNumber, PDF: page + "/voucher.pdf"}}
	}
	expires = expires.Truncate(time.Second)
	pi.ExpiresAt, pi.NextActionType = &expires, pi.nextAction.Type
	a.waiting[pi.ID] = pi
	s.emit(a, "payment_intent.requires_action", pi, c.now)
}

// startChallenge puts a card intent in requires_action for 3-D Secure: a
// redirect to the challenge page when a return_url came, else for Stripe.js.
// Requires s.mu.
func (s *Server) startChallenge(a *account, pi *intentRecord, c *call) {
	page := c.base + "/_sim/3ds/" + pi.ID
	pi.Status = "requires_action"
	if pi.returnURL != "" {
		pi.nextAction = &nextActionJSON{Type: "redirect_to_url", RedirectToURL: &redirectJSON{URL: page, ReturnURL: pi.returnURL}}
	} else {
		pi.nextAction = &nextActionJSON{Type: "use_stripe_sdk", UseStripeSDK: map[string]string{
			"type": "three_d_secure_redirect", "stripe_js": page, "source": newID("src_", 24)}}
	}
	pi.NextActionType = pi.nextAction.Type
	s.emit(a, "payment_intent.requires_action", pi, c.now)
}

// expireDue expires the account's Pix and Boleto intents whose expiry has
// passed. Requires s.mu.
func (s *Server) expireDue(a *account, now time.Time) {
	s.mpExpireDue(a, now)
	if len(a.waiting) == 0 {
		return
	}
	var due []*intentRecord
	for _, pi := range a.waiting {
		if !now.Before(*pi.ExpiresAt) {
			due = append(due, pi)
		}
	}
	// Oldest expiry first, so events come in the order things happened.
	slices.SortFunc(due, func(x, y *intentRecord) int { return x.ExpiresAt.Compare(*y.ExpiresAt) })
	for _, pi := range due {
		s.expire(a, pi, now)
	}
}

// expire ends an unpaid Pix or Boleto as Stripe does: the intent goes back
// to requires_payment_method with last_payment_error
// payment_intent_payment_attempt_expired and payment_intent.payment_failed
// is sent; it can be canceled afterwards but never paid. Requires s.mu.
func (s *Server) expire(a *account, pi *intentRecord, now time.Time) {
	delete(a.waiting, pi.ID)
	pi.Status, pi.nextAction, pi.NextActionType = "requires_payment_method", nil, ""
	pi.lastError = &apiError{Type: invalidRequest, Code: "payment_intent_payment_attempt_expired",
		Message: "The payment attempt for this PaymentIntent has expired: the customer did not pay in time.",
		DocURL:  "https://stripe.com/docs/error-codes/payment-intent-payment-attempt-expired"}
	a.stats.Declines++
	s.emit(a, "payment_intent.payment_failed", pi, now)
}

// ErrUnexpectedState is returned by Pay, Fail, Expire and MarkProcessing
// when the intent's status does not allow the change.
var ErrUnexpectedState = errors.New("providersim: the intent's status does not allow this")

// ErrNoSuchIntent is returned for an unknown intent id.
var ErrNoSuchIntent = errors.New("providersim: no such intent")

// Pay completes the customer's part: approves the 3-D Secure challenge, or
// pays the Pix or Boleto (also from processing). A manual-capture card then
// awaits capture; everything else succeeds. Paying an intent that is not
// waiting (expired, canceled, already paid) fails with ErrUnexpectedState.
func (s *Server) Pay(id string) (Intent, error) {
	return s.transition(id, func(a *account, pi *intentRecord, now time.Time) error {
		if pi.Status != "requires_action" && (pi.Status != "processing" || pi.MethodType == "card") {
			return unexpected(pi, "paid")
		}
		delete(a.waiting, pi.ID)
		s.authorize(a, pi, now)
		return nil
	})
}

// Fail fails the customer's part: the 3-D Secure challenge (last_payment_error
// payment_intent_authentication_failure), or a Pix or Boleto that was
// processing. The intent goes back to requires_payment_method and
// payment_intent.payment_failed is sent.
func (s *Server) Fail(id string) (Intent, error) {
	return s.transition(id, func(a *account, pi *intentRecord, now time.Time) error {
		switch {
		case pi.MethodType == "card" && pi.Status == "requires_action":
			pi.PaymentMethod = "" // Stripe detaches the card that failed
			pi.lastError = &apiError{Type: invalidRequest, Code: "payment_intent_authentication_failure",
				Message: "The provided PaymentMethod has failed authentication. You can provide payment_method_data or a new PaymentMethod to attempt to fulfill this PaymentIntent again.",
				DocURL:  "https://stripe.com/docs/error-codes/payment-intent-authentication-failure"}
		case pi.MethodType != "card" && pi.Status == "processing":
			pi.lastError = &apiError{Type: invalidRequest, Code: "payment_method_provider_decline",
				Message: "The payment was declined by the payment method provider.",
				DocURL:  "https://stripe.com/docs/error-codes/payment-method-provider-decline"}
		default:
			return unexpected(pi, "failed")
		}
		pi.Status, pi.nextAction, pi.NextActionType = "requires_payment_method", nil, ""
		a.stats.Declines++
		s.emit(a, "payment_intent.payment_failed", pi, now)
		return nil
	})
}

// Expire expires a waiting Pix or Boleto now, whatever its expires_at, as if
// the customer had let it lapse (see expire). The clock expires them too.
func (s *Server) Expire(id string) (Intent, error) {
	return s.transition(id, func(a *account, pi *intentRecord, now time.Time) error {
		if pi.Status != "requires_action" || pi.MethodType == "card" {
			return unexpected(pi, "expired")
		}
		s.expire(a, pi, now)
		return nil
	})
}

// MarkProcessing moves a waiting Boleto (or Pix) to processing, as when the
// customer has paid and the bank has yet to confirm: nothing is left for
// the customer to do and it no longer expires.
func (s *Server) MarkProcessing(id string) (Intent, error) {
	return s.transition(id, func(a *account, pi *intentRecord, now time.Time) error {
		if pi.Status != "requires_action" || pi.MethodType == "card" {
			return unexpected(pi, "marked processing")
		}
		delete(a.waiting, pi.ID)
		pi.Status, pi.nextAction, pi.NextActionType = "processing", nil, ""
		s.emit(a, "payment_intent.processing", pi, now)
		return nil
	})
}

func unexpected(pi *intentRecord, verb string) error {
	return fmt.Errorf("%w: intent %s (%s %s) cannot be %s", ErrUnexpectedState, pi.ID, pi.MethodType, pi.Status, verb)
}

// transition applies a customer-side change to an intent of any secret key,
// after expiring what is due.
func (s *Server) transition(id string, change func(*account, *intentRecord, time.Time) error) (Intent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, pi := s.findIntent(id)
	if pi == nil {
		return Intent{}, fmt.Errorf("%w: %s", ErrNoSuchIntent, id)
	}
	now := s.now()
	s.expireDue(a, now)
	if err := change(a, pi, now); err != nil {
		return pi.snapshot(), err
	}
	return pi.snapshot(), nil
}

// findIntent finds an intent by id among all secret keys: hosted pages and
// control calls carry no key. Requires s.mu.
func (s *Server) findIntent(id string) (*account, *intentRecord) {
	for _, a := range s.accounts {
		if pi := a.intents[id]; pi != nil {
			return a, pi
		}
	}
	return nil, nil
}

func (pi *intentRecord) snapshot() Intent {
	out := pi.Intent
	out.Metadata = maps.Clone(pi.Metadata)
	return out
}

// pixPayload is a Pix "copia e cola" code in the EMV BR Code layout, with a
// made-up key and a valid CRC, so wallets' parsers accept its shape.
func pixPayload(pi *intentRecord) string {
	return brCode("sim-"+strings.ToLower(pi.ID[3:15])+"@providersim.test", pi.Amount, pi.ID[3:])
}

// brCode is a Pix BR Code paying amount (cents) to key, with txid.
func brCode(key string, amount int64, txid string) string {
	field := func(id, v string) string { return id + fmt.Sprintf("%02d", len(v)) + v }
	account := field("00", "br.gov.bcb.pix") + field("01", key)
	value := strconv.FormatFloat(float64(amount)/100, 'f', 2, 64)
	p := field("00", "01") + field("26", account) + field("52", "0000") + field("53", "986") +
		field("54", value) + field("58", "BR") + field("59", "PROVIDERSIM") + field("60", "SAO PAULO") +
		field("62", field("05", txid))
	p += "6304"
	return p + fmt.Sprintf("%04X", crc16CCITT(p))
}

// crc16CCITT is CRC-16/CCITT-FALSE, the checksum of a BR Code.
func crc16CCITT(s string) uint16 {
	crc := uint16(0xFFFF)
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// boletoNumber is a 47-digit "linha digitável" of made-up digits.
func boletoNumber() string {
	b := make([]byte, 47)
	for i := range b {
		b[i] = byte('0' + rand.IntN(10))
	}
	return string(b)
}

// controlTransition serves POST /_sim/intents/{id}/pay and its siblings.
func (s *Server) controlTransition(f func(string) (Intent, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pi, err := f(r.PathValue("id"))
		switch {
		case errors.Is(err, ErrNoSuchIntent):
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		case err != nil:
			writeJSON(w, http.StatusConflict, map[string]any{"error": err.Error(), "intent": pi})
		default:
			writeJSON(w, http.StatusOK, pi)
		}
	}
}
