package console

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/operations"
	"github.com/acmepay/payments/internal/payment"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
)

const discrepancyPageSize = 25

// discrepancyRow is a discrepancy as the pages show it.
type discrepancyRow struct {
	*payment.Discrepancy
	Ours   string
	Theirs string
}

type kindCount struct {
	Kind string
	N    int64
}

type resolveChoice struct {
	Action  payment.ResolveAction
	Label   string
	Explain string
}

// resolveChoices are the resolve actions, each with what it does, in the
// order the form offers them: the one that changes nothing first.
var resolveChoices = []resolveChoice{
	{payment.ResolveNote, "Note only", "Records that you looked at it and why. Nothing changes at the provider or here."},
	{payment.ResolveAdopt, "Adopt the provider's state", "Makes our record say what the provider says now, audited and with its event. No money moves."},
	{payment.ResolveRefund, "Refund", "Refunds what the provider still holds through the normal refund path. Money goes back to the customer."},
}

func rowsOf(ds []*payment.Discrepancy) []discrepancyRow {
	out := make([]discrepancyRow, len(ds))
	for i, d := range ds {
		out[i] = discrepancyRow{Discrepancy: d, Ours: sides(d.Ours), Theirs: sides(d.Theirs)}
	}
	return out
}

// sides renders one side of a discrepancy as "field: value" pairs, lists
// of objects (disputes) one per line.
func sides(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	return plain(v)
}

func plain(v any) string {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ": " + plain(x[k])
		}
		return strings.Join(parts, ", ")
	case []any:
		if len(x) == 0 {
			return "none"
		}
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = plain(e)
			if _, ok := e.(map[string]any); ok {
				parts[i] = "(" + parts[i] + ")"
			}
		}
		return strings.Join(parts, "; ")
	case nil:
		return "—"
	case string:
		return x
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// discrepancyList pages the audit's findings, open ones by default.
func (c *Console) discrepancyList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := q.Get("status")
	if status == "" {
		status = string(payment.DiscrepancyOpen)
	}
	filter := payment.DiscrepancyStatus(status)
	if status == "all" {
		filter = ""
	}
	page, err := c.cfg.Operations.ListDiscrepancies(r.Context(), filter, "", q.Get("cursor"), discrepancyPageSize)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := pageData{Title: "Discrepancies", Nav: "discrepancies", DscStatus: status, Discrepancies: rowsOf(page.Data),
		Notice: notices[q.Get("done")]}
	if page.HasMore {
		d.NextCursor = "/console/discrepancies?" + url.Values{"status": {status}, "cursor": {page.NextCursor}}.Encode()
	}
	c.render(w, r, http.StatusOK, "discrepancies", d)
}

// resolvePage is the confirmation form, with a fresh idempotency key each
// time it is shown: a double submit of one form resolves once.
func (c *Console) resolvePage(w http.ResponseWriter, r *http.Request) {
	c.showResolve(w, r, http.StatusOK, uuid.NewString(), "", "", "")
}

func (c *Console) showResolve(w http.ResponseWriter, r *http.Request, status int, key string, action payment.ResolveAction, reason, msg string) {
	dsc, err := c.cfg.Operations.GetDiscrepancy(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if action == "" {
		action = payment.ResolveNote
	}
	row := rowsOf([]*payment.Discrepancy{dsc})[0]
	c.render(w, r, status, "resolve", pageData{Title: "Resolve a discrepancy", Nav: "discrepancies", Discrepancy: &row,
		Choices: resolveChoices, Chosen: action, Key: key, Reason: reason, Error: msg})
}

// resolve runs the admin API's resolve with the signed-in actor, the
// reason given and the form's idempotency key.
func (c *Console) resolve(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := chi.URLParam(r, "id")
	actor := sessionOf(r).Actor
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	action := payment.ResolveAction(r.PostForm.Get("action"))
	key := r.PostForm.Get("idempotency_key")
	known := false
	for _, ch := range resolveChoices {
		known = known || ch.Action == action
	}
	if !known {
		c.showResolve(w, r, http.StatusBadRequest, key, "", reason, "Choose what to do: note, adopt the provider's state or refund.")
		return
	}
	if reason == "" || utf8.RuneCountInString(reason) > 1000 {
		c.showResolve(w, r, http.StatusBadRequest, key, action, reason, "Give a reason (at most 1000 characters): it is kept in the payment's audit trail.")
		return
	}
	key, err := idempotency.ParseKey(key)
	if err != nil {
		c.showResolve(w, r, http.StatusBadRequest, "", action, reason, "This form has no valid idempotency key; reload it.")
		return
	}
	resp, err := c.cfg.Operations.Resolve(ctx, key, id, operations.ResolveRequest{Actor: actor, Reason: reason, Action: action})
	if err == nil {
		// A stored refusal replayed for the same key.
		err = payment.AnswerError(resp)
	}
	c.cfg.Logger.InfoContext(ctx, "console action", slog.String("actor", actor), slog.String("action", "discrepancy.resolve"),
		slog.String("discrepancy_id", id), slog.String("resolution", string(action)), slog.String("code", string(payment.ErrorCode(err))))
	if err != nil {
		var pe *payment.Error
		if errors.As(err, &pe) && pe.Code != payment.CodeNotFound {
			c.showResolve(w, r, http.StatusConflict, key, action, reason, pe.Message)
			return
		}
		c.fail(w, r, err)
		return
	}
	var res struct {
		PaymentID string `json:"payment_id"`
	}
	done := "resolve"
	if resp.Kind == idempotency.KindAccepted {
		// The refund's outcome is unknown: the discrepancy stays open.
		done = "resolve-pending"
	}
	if err := json.Unmarshal(resp.Body, &res); err != nil || res.PaymentID == "" {
		http.Redirect(w, r, "/console/discrepancies?status=all&done="+done, http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/console/payments/"+url.PathEscape(res.PaymentID)+"?done="+done, http.StatusSeeOther)
}
