package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/payment"
	"github.com/go-chi/chi/v5"
)

// accountView is one account's page: its providers and routing, and the
// routing form (as sent back after a refusal).
type accountView struct {
	Summary account.Summary
	Routing payment.Routing
	// RoutingJSON is the text of the routing form.
	RoutingJSON string
	Reason      string
	Fields      []payment.FieldError
	Saved       bool
}

func (c *Console) accountPage(w http.ResponseWriter, r *http.Request) {
	c.showAccount(w, r, http.StatusOK, chi.URLParam(r, "id"), accountView{Saved: r.URL.Query().Get("done") == "routing"}, "")
}

// showAccount renders the account with its current routing; v carries the
// form's text when a change was refused.
func (c *Console) showAccount(w http.ResponseWriter, r *http.Request, status int, id string, v accountView, msg string) {
	var err error
	v.Summary, err = c.cfg.Accounts.Summary(r.Context(), id)
	if errors.Is(err, payment.ErrNotFound) {
		c.render(w, r, http.StatusNotFound, "message", pageData{Title: "Not found", Message: "There is no such account."})
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if v.Routing, err = c.cfg.Accounts.Routing(r.Context(), id); err != nil {
		c.fail(w, r, err)
		return
	}
	if v.RoutingJSON == "" {
		b, _ := json.MarshalIndent(v.Routing, "", "  ")
		v.RoutingJSON = string(b)
	}
	c.render(w, r, status, "account", pageData{Title: "Account " + v.Summary.Name, Nav: "accounts", AccountPage: &v, Error: msg})
}

// setRouting replaces the account's routing with the form's JSON, through
// the service the admin API uses; the actor and reason are logged.
func (c *Console) setRouting(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	v := accountView{RoutingJSON: r.PostForm.Get("routing"), Reason: strings.TrimSpace(r.PostForm.Get("reason"))}
	if v.Reason == "" || utf8.RuneCountInString(v.Reason) > 1000 {
		c.showAccount(w, r, http.StatusBadRequest, id, v, "Give a reason (at most 1000 characters).")
		return
	}
	b, err := payment.DecodeRouting([]byte(v.RoutingJSON))
	var rt payment.Routing
	if err == nil {
		rt, err = c.cfg.Accounts.SetRouting(r.Context(), id, b)
	}
	var pe *payment.Error
	switch {
	case errors.Is(err, payment.ErrNotFound):
		c.render(w, r, http.StatusNotFound, "message", pageData{Title: "Not found", Message: "There is no such account."})
		return
	case errors.As(err, &pe):
		v.Fields = pe.Fields
		c.showAccount(w, r, http.StatusBadRequest, id, v, "The routing was not changed: "+pe.Message+".")
		return
	case err != nil:
		c.fail(w, r, err)
		return
	}
	c.cfg.Logger.InfoContext(r.Context(), "console action", slog.String("actor", sessionOf(r).Actor), slog.String("action", "account.routing"),
		slog.String("account_id", id), slog.String("reason", v.Reason),
		slog.String("routing", fmt.Sprintf("%d rules, default %s", len(rt.Rules), strings.Join(rt.Default, ","))))
	http.Redirect(w, r, "/console/accounts/"+id+"?done=routing", http.StatusSeeOther)
}
