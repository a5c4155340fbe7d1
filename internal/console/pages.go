package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/inbound"
	"github.com/acmepay/payments/internal/operations"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/reconcile"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
)

// pageData is what every template gets; each page fills its part.
type pageData struct {
	Title   string
	Actor   string
	CSRF    string
	Next    string
	Error   string
	Notice  string
	Message string
	Nav     string

	// overview
	Statuses  []statusCount
	Ages      []string
	Waiting   []waitingRow
	Pass      *reconcile.Pass
	NoPass    bool
	Attention int
	OpenKinds []kindCount
	OpenTotal int64
	Circuits  []circuitRow
	// stuck list
	Filter     stuckFilter
	AllStatus  []payment.Status
	Accounts   []account.Summary
	Stuck      []operations.StuckPayment
	NextCursor string
	// payment
	Payment  *payment.Payment
	Compare  []compareRow
	Provider *operations.ProviderState
	ProvErr  string
	Attempts []attemptRow
	Timeline []timelineItem
	Actions  []string
	// discrepancies (list, a payment's, the resolve form)
	DscStatus     string
	Discrepancies []discrepancyRow
	Discrepancy   *discrepancyRow
	Choices       []resolveChoice
	Chosen        payment.ResolveAction
	// search
	Query    string
	Hits     []SearchHit
	Searched bool
	// overview charts
	Charts []providerChart
	// confirm
	Action string
	Key    string
	Reason string
	Amount string
	// accounts
	Created *createdAccount
	Form    accountForm
	// account
	AccountPage *accountView
}

type statusCount struct {
	Status payment.Status
	N      int64
}

type waitingRow struct {
	Status payment.Status
	Counts []ageCell
}

type ageCell struct {
	N         int64
	OlderThan string
}

type stuckFilter struct {
	Statuses  map[payment.Status]bool
	Account   string
	OlderThan string
	After     string
}

type compareRow struct {
	Field  string
	Ours   string
	Theirs string
	Differ bool
}

type attemptRow struct {
	*payment.Attempt
	// ProviderName is where the attempt went, never empty.
	ProviderName   string
	NeedsAttention bool
}

type circuitRow struct {
	Provider string
	State    string
}

// circuitRows lists each provider's circuit, by provider name.
func circuitRows(states map[string]string) []circuitRow {
	out := make([]circuitRow, 0, len(states))
	for name, st := range states {
		out = append(out, circuitRow{Provider: name, State: st})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Provider < out[j].Provider })
	return out
}

// attemptProvider names where an attempt went: its own provider, else its
// payment's; rows from before several providers read as Stripe.
func attemptProvider(p *payment.Payment, a *payment.Attempt) string {
	if a.Provider != "" {
		return a.Provider
	}
	return payment.ProviderOf(p.Provider)
}

type timelineItem struct {
	At     time.Time
	Kind   string // audit, event, webhook
	Title  string
	Actor  string
	Reason string
	Detail string
	// RequestID is the request that wrote an audit row, to find its logs.
	RequestID string
}

type createdAccount struct {
	ID     string
	Name   string
	APIKey string
}

type accountForm struct {
	Name   string
	Reason string
}

var funcs = template.FuncMap{
	"time": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"ptime": func(t *time.Time) string {
		if t == nil {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"money":       money,
	"provider":    payment.ProviderOf,
	"has":         func(m map[payment.Status]bool, s payment.Status) bool { return m[s] },
	"actionLabel": func(a string) string { return actionLabels[a] },
}

func money(amount int64, currency string) string {
	return fmt.Sprintf("%d.%02d %s", amount/100, amount%100, strings.ToUpper(currency))
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page string, d pageData) {
	t, ok := c.pages[page]
	if !ok {
		http.Error(w, "no such template", http.StatusInternalServerError)
		return
	}
	s := sessionOf(r)
	d.Actor = s.Actor
	if s.Nonce != "" {
		d.CSRF = c.keys.csrf(s)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", d); err != nil {
		c.cfg.Logger.ErrorContext(r.Context(), "console template failed", slog.String("page", page), slog.String("error", err.Error()))
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// fail shows an error page: a domain error's message, which is written for
// callers, or a generic line with the details in the log.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	var pe *payment.Error
	if errors.As(err, &pe) {
		status := http.StatusConflict
		switch pe.Code {
		case payment.CodeNotFound:
			status = http.StatusNotFound
		case payment.CodeInvalidRequest:
			status = http.StatusBadRequest
		}
		c.render(w, r, status, "message", pageData{Title: "Not done", Message: pe.Message})
		return
	}
	c.cfg.Logger.ErrorContext(r.Context(), "console request failed", slog.String("error", err.Error()))
	c.render(w, r, http.StatusInternalServerError, "message", pageData{Title: "Something went wrong",
		Message: "The request failed; the details are in the service's log."})
}

var waitingStatuses = []payment.Status{payment.StatusUnknown, payment.StatusProcessing, payment.StatusRequiresAction, payment.StatusPending}

var allStatuses = []payment.Status{payment.StatusProcessing, payment.StatusUnknown, payment.StatusRequiresAction, payment.StatusPending,
	payment.StatusAuthorized, payment.StatusCaptured, payment.StatusDeclined, payment.StatusFailed, payment.StatusCanceled}

var discrepancyKinds = []payment.DiscrepancyKind{payment.KindPaidAtProviderNotHere, payment.KindStatusMismatch,
	payment.KindAmountCapturedMismatch, payment.KindAmountRefundedMismatch, payment.KindDisputed}

var ageBuckets = []struct{ key, label, olderThan string }{
	{"under_5m", "under 5 min", "0s"}, {"5m_to_1h", "5 min – 1 h", "5m"}, {"1h_to_24h", "1 h – 24 h", "1h"}, {"over_24h", "over 24 h", "24h"},
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	counts, err := c.cfg.Store.PaymentCountByStatus(ctx)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ages, err := c.cfg.Store.PaymentCountWaitingByAge(ctx, payment.NewClock(c.cfg.Now)())
	if err != nil {
		c.fail(w, r, err)
		return
	}
	n, err := c.cfg.Reconciler.AttemptCountNeedingAttention(ctx)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	open, err := c.cfg.Store.DiscrepancyCountOpenByKind(ctx)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := pageData{Title: "Overview", Nav: "overview", Attention: n, Circuits: circuitRows(c.cfg.Payments.CircuitStates())}
	for _, k := range discrepancyKinds {
		d.OpenKinds = append(d.OpenKinds, kindCount{string(k), open[string(k)]})
		d.OpenTotal += open[string(k)]
	}
	for _, st := range allStatuses {
		d.Statuses = append(d.Statuses, statusCount{st, counts[string(st)]})
	}
	for _, b := range ageBuckets {
		d.Ages = append(d.Ages, b.label)
	}
	for _, st := range waitingStatuses {
		row := waitingRow{Status: st}
		for _, b := range ageBuckets {
			cell := ageCell{OlderThan: b.olderThan}
			for _, a := range ages {
				if a.Status == st && a.Age == b.key {
					cell.N = a.N
				}
			}
			row.Counts = append(row.Counts, cell)
		}
		d.Waiting = append(d.Waiting, row)
	}
	if d.Charts, err = c.charts(ctx); err != nil {
		c.fail(w, r, err)
		return
	}
	d.NoPass = true
	if p, ok := c.cfg.Reconciler.LastPass(); ok {
		d.Pass, d.NoPass = &p, false
	}
	c.render(w, r, http.StatusOK, "overview", d)
}

const stuckPageSize = 25

func (c *Console) stuckList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := stuckFilter{Statuses: map[payment.Status]bool{}, Account: q.Get("account"), OlderThan: q.Get("older_than"), After: q.Get("after")}
	statuses := []payment.Status{payment.StatusUnknown, payment.StatusProcessing}
	if vs := q["status"]; len(vs) > 0 {
		var err error
		if statuses, err = operations.ParseStatuses(strings.Join(vs, ",")); err != nil {
			c.fail(w, r, err)
			return
		}
	}
	for _, st := range statuses {
		f.Statuses[st] = true
	}
	var olderThan time.Duration
	if f.OlderThan != "" {
		d, err := time.ParseDuration(f.OlderThan)
		if err != nil || d < 0 {
			c.fail(w, r, payment.Errorf(payment.CodeInvalidRequest, "Minimum age must be a duration such as 5m, 1h or 24h."))
			return
		}
		olderThan = d
	}
	after, err := operations.ParseStuckCursor(f.After)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ps, err := c.cfg.Operations.ListStuck(r.Context(), f.Account, statuses, olderThan, after, stuckPageSize+1)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	accounts, err := c.cfg.Accounts.List(r.Context())
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := pageData{Title: "Stuck payments", Nav: "payments", Filter: f, AllStatus: allStatuses, Accounts: accounts}
	if len(ps) > stuckPageSize {
		ps = ps[:stuckPageSize]
		last := ps[len(ps)-1]
		next := r.URL.Query()
		next.Set("after", operations.StuckCursor{UpdatedAt: last.UpdatedAt, ID: last.ID}.String())
		d.NextCursor = "/console/payments?" + next.Encode()
	}
	d.Stuck = ps
	c.render(w, r, http.StatusOK, "payments", d)
}

func (c *Console) paymentPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	v, err := c.cfg.Operations.AdminGet(ctx, chi.URLParam(r, "id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	p := v.Payment
	d := pageData{Title: "Payment " + p.ID, Nav: "payments", Payment: p, Notice: notices[r.URL.Query().Get("done")]}
	st, err := c.cfg.Operations.ProviderState(ctx, p.ID)
	if err != nil {
		c.cfg.Logger.WarnContext(ctx, "console: provider state unavailable", slog.String("payment_id", p.ID), slog.String("error", err.Error()))
		d.ProvErr = "The provider could not be asked just now; reload to try again."
	} else {
		d.Provider = &st
	}
	d.Compare = compare(p, d.Provider)
	for _, a := range v.Attempts {
		d.Attempts = append(d.Attempts, attemptRow{a, attemptProvider(p, a), c.cfg.Reconciler.NeedsAttention(a)})
	}
	events, err := c.cfg.Store.EventListByPayment(ctx, p.AccountID, p.ID, 200)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	receipts, err := c.cfg.Store.ProviderEventReceiptListByPayment(ctx, p.AccountID, p.ID, 200)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	dscs, err := c.cfg.Operations.ListDiscrepancies(ctx, "", p.ID, "", 100)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d.Discrepancies = rowsOf(dscs.Data)
	d.Timeline = timeline(v.Audit, events, receipts)
	d.Actions = actionsFor(p, v.Attempts)
	c.render(w, r, http.StatusOK, "payment", d)
}

var notices = map[string]string{
	"reconcile": "Reconciled with the provider.",
	"replay":    "Replayed.",
	"cancel":    "Cancel sent.",
	"capture":   "Capture sent.",
	"refund":    "Refund sent.",
	"resolve":   "Discrepancy resolved.",
	"resolve-pending": "Refund sent; the provider's answer is not known yet. The discrepancy stays open, held by this refund, " +
		"and is resolved when the refund settles.",
}

// compare puts our record beside the provider's; a row differs when the two
// cannot both be true of one payment.
func compare(p *payment.Payment, st *operations.ProviderState) []compareRow {
	rows := []compareRow{
		{Field: "Status", Ours: string(p.Status)},
		{Field: "Amount", Ours: money(p.Amount, p.Currency)},
		{Field: "Captured", Ours: money(p.AmountCaptured, p.Currency)},
		{Field: "Refunded", Ours: money(p.AmountRefunded, p.Currency)},
		{Field: "Provider id", Ours: orDash(p.ProviderPaymentID)},
	}
	if st == nil {
		for i := range rows {
			rows[i].Theirs = "unknown"
		}
		return rows
	}
	in := st.Intent
	if in == nil {
		rows[0].Theirs = "no such payment at the provider"
		rows[0].Differ = !(p.Status == payment.StatusFailed || p.Status == payment.StatusDeclined || p.Status == payment.StatusProcessing)
		for i := 1; i < len(rows); i++ {
			rows[i].Theirs = "—"
		}
		rows[4].Differ = p.ProviderPaymentID != ""
		return rows
	}
	rows[0].Theirs, rows[0].Differ = string(in.State), !consistent(p.Status, in.State)
	rows[1].Theirs, rows[1].Differ = money(in.Amount, in.Currency), in.Amount != p.Amount || !strings.EqualFold(in.Currency, p.Currency)
	rows[2].Theirs, rows[2].Differ = money(in.AmountReceived, in.Currency), in.AmountReceived != p.AmountCaptured
	rows[3].Theirs, rows[3].Differ = money(st.Refunded, in.Currency), st.Refunded != p.AmountRefunded
	rows[4].Theirs, rows[4].Differ = in.ID, p.ProviderPaymentID != "" && in.ID != p.ProviderPaymentID
	if p.ProviderPaymentID == "" {
		rows[4].Differ = true // found only by searching: we never learned it
	}
	return rows
}

// consistent tells whether our status can be true while the provider shows
// this state.
func consistent(ours payment.Status, theirs provider.IntentState) bool {
	switch ours {
	case payment.StatusAuthorized:
		return theirs == provider.IntentAuthorized
	case payment.StatusCaptured:
		return theirs == provider.IntentCaptured
	case payment.StatusCanceled:
		return theirs == provider.IntentCanceled
	case payment.StatusDeclined, payment.StatusFailed:
		return theirs == provider.IntentNeedsPaymentMethod || theirs == provider.IntentCanceled || theirs == provider.IntentRequiresConfirmation
	case payment.StatusRequiresAction:
		return theirs == provider.IntentRequiresAction
	case payment.StatusPending:
		return theirs == provider.IntentProcessing || theirs == provider.IntentRequiresAction
	}
	return false // unknown or processing: we do not know what the provider knows
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func timeline(audit []payment.AuditEntry, events []payment.Event, receipts []inbound.Receipt) []timelineItem {
	var out []timelineItem
	for _, a := range audit {
		var det []string
		reqID := ""
		for k, v := range a.Details {
			if id, ok := v.(string); ok && k == "request_id" {
				reqID = id
				continue
			}
			det = append(det, fmt.Sprintf("%s=%v", k, v))
		}
		sort.Strings(det)
		out = append(out, timelineItem{At: a.At, Kind: "audit", Title: a.Action, Actor: a.Actor, Reason: a.Reason,
			Detail: strings.Join(det, " "), RequestID: reqID})
	}
	for _, e := range events {
		out = append(out, timelineItem{At: e.CreatedAt, Kind: "event", Title: e.Type, Detail: e.ID})
	}
	for _, r := range receipts {
		out = append(out, timelineItem{At: r.ReceivedAt, Kind: "webhook", Title: r.Type, Detail: r.EventID + " (" + r.Outcome + ")"})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// actionsFor offers what could apply; the service still checks every
// guard when the action is confirmed.
func actionsFor(p *payment.Payment, attempts []*payment.Attempt) []string {
	var out []string
	for _, a := range attempts {
		if !a.Status.Resolved() {
			out = append(out, "reconcile")
			break
		}
	}
	switch p.Status {
	case payment.StatusFailed, payment.StatusDeclined, payment.StatusUnknown, payment.StatusProcessing:
		out = append(out, "replay")
	case payment.StatusAuthorized:
		out = append(out, "capture", "cancel")
	case payment.StatusRequiresAction:
		out = append(out, "cancel")
	case payment.StatusCaptured:
		if p.AmountRefunded < p.AmountCaptured {
			out = append(out, "refund")
		}
	}
	return out
}

var actionTitles = map[string]string{"reconcile": "Reconcile now", "replay": "Replay", "cancel": "Cancel the payment",
	"capture": "Capture the payment", "refund": "Refund"}

// actionLabels are the payment page's buttons.
var actionLabels = map[string]string{"reconcile": "Reconcile now", "replay": "Replay", "cancel": "Cancel…",
	"capture": "Capture…", "refund": "Refund…"}

// formAmount is the amount field of a capture or refund form, in minor
// units: empty is the default (0), anything else a positive integer.
func formAmount(v string) (int64, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n > 0 && n <= payment.MaxAmount
}

func (c *Console) confirmPage(w http.ResponseWriter, r *http.Request) {
	action := chi.URLParam(r, "action")
	if _, ok := actionTitles[action]; !ok {
		c.render(w, r, http.StatusNotFound, "message", pageData{Title: "Not found", Message: "There is no such action."})
		return
	}
	v, err := c.cfg.Operations.AdminGet(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "confirm", pageData{Title: actionTitles[action], Nav: "payments", Payment: v.Payment, Action: action,
		Key: uuid.NewString(), Amount: defaultAmount(action, v.Payment)})
}

// defaultAmount fills a capture or refund form: the whole authorized
// amount, or what is left to refund.
func defaultAmount(action string, p *payment.Payment) string {
	switch action {
	case "capture":
		return strconv.FormatInt(p.Amount, 10)
	case "refund":
		return strconv.FormatInt(p.AmountCaptured-p.AmountRefunded, 10)
	}
	return ""
}

// act runs a confirmed action through the service methods the admin API
// uses, with the signed-in actor and the reason given.
func (c *Console) act(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	action, id := chi.URLParam(r, "action"), chi.URLParam(r, "id")
	if _, ok := actionTitles[action]; !ok {
		c.render(w, r, http.StatusNotFound, "message", pageData{Title: "Not found", Message: "There is no such action."})
		return
	}
	actor := sessionOf(r).Actor
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	key := r.PostForm.Get("idempotency_key")
	amountText := r.PostForm.Get("amount")
	again := func(status int, msg string) {
		v, err := c.cfg.Operations.AdminGet(ctx, id)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		c.render(w, r, status, "confirm", pageData{Title: actionTitles[action], Nav: "payments", Payment: v.Payment, Action: action,
			Key: key, Reason: reason, Amount: amountText, Error: msg})
	}
	if reason == "" || utf8.RuneCountInString(reason) > 1000 {
		again(http.StatusBadRequest, "Give a reason (at most 1000 characters): it is kept in the payment's audit trail.")
		return
	}
	amount, ok := formAmount(amountText)
	if !ok || (action == "refund" && amount == 0) {
		again(http.StatusBadRequest, "The amount is a whole number of minor units (cents), from 1 to 99999999.")
		return
	}
	var err error
	if action == "reconcile" {
		_, err = c.cfg.Reconciler.Payment(ctx, id, actor, reason)
	} else {
		if key, err = idempotency.ParseKey(key); err != nil {
			again(http.StatusBadRequest, "This form has no valid idempotency key; reload it.")
			return
		}
		err = c.keyed(ctx, action, key, id, actor, reason, amount)
	}
	c.cfg.Logger.InfoContext(ctx, "console action", slog.String("actor", actor), slog.String("action", action),
		slog.String("payment_id", id), slog.String("code", string(payment.ErrorCode(err))))
	if err != nil {
		var pe *payment.Error
		if errors.As(err, &pe) {
			again(http.StatusConflict, pe.Message)
			return
		}
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/console/payments/"+id+"?done="+action, http.StatusSeeOther)
}

// keyed runs an action that moves money or state at the provider under the
// form's idempotency key: a second submit of the same form is its replay.
func (c *Console) keyed(ctx context.Context, action, key, id, actor, reason string, amount int64) error {
	var (
		resp idempotency.Answer
		err  error
	)
	ops := c.cfg.Operations
	switch action {
	case "replay":
		resp, err = ops.Replay(ctx, key, id, actor, reason)
	case "cancel":
		resp, err = ops.AdminCancel(ctx, key, id, actor, reason)
	case "capture":
		resp, err = ops.AdminCapture(ctx, key, id, actor, reason, amount)
	case "refund":
		resp, err = ops.AdminRefund(ctx, key, id, actor, reason, amount)
	}
	if err != nil {
		return err
	}
	// A refusal, or one stored earlier and replayed for the same key.
	return payment.AnswerError(resp)
}

func (c *Console) accountsPage(w http.ResponseWriter, r *http.Request) {
	c.showAccounts(w, r, http.StatusOK, pageData{})
}

func (c *Console) showAccounts(w http.ResponseWriter, r *http.Request, status int, d pageData) {
	list, err := c.cfg.Accounts.List(r.Context())
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d.Title, d.Nav, d.Accounts = "Accounts", "accounts", list
	c.render(w, r, status, "accounts", d)
}

// createAccount shows the new API key once, in this response only; no page
// renders it again and nothing logs it.
func (c *Console) createAccount(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	form := accountForm{Name: strings.TrimSpace(f.Get("name")), Reason: strings.TrimSpace(f.Get("reason"))}
	if form.Reason == "" || utf8.RuneCountInString(form.Reason) > 1000 {
		c.showAccounts(w, r, http.StatusBadRequest, pageData{Form: form, Error: "Give a reason (at most 1000 characters)."})
		return
	}
	a, apiKey, err := c.cfg.Accounts.Create(r.Context(), form.Name, f.Get("stripe_secret_key"), f.Get("webhook_secret"))
	actor := sessionOf(r).Actor
	if err != nil {
		var pe *payment.Error
		if errors.As(err, &pe) {
			c.showAccounts(w, r, http.StatusBadRequest, pageData{Form: form, Error: pe.Message})
			return
		}
		c.fail(w, r, err)
		return
	}
	c.cfg.Logger.InfoContext(r.Context(), "console action", slog.String("actor", actor), slog.String("action", "account.create"),
		slog.String("account_id", a.ID), slog.String("reason", form.Reason))
	c.showAccounts(w, r, http.StatusCreated, pageData{Created: &createdAccount{ID: a.ID, Name: a.Name, APIKey: apiKey}})
}
