// Package console is the operations console: server-rendered pages under
// /console/ where an operator signed in with ADMIN_TOKEN finds stuck
// payments, compares them with the provider and acts on them (reconcile,
// replay, cancel) through the same service methods as the admin API, each
// action with the operator's name and a reason in the audit trail.
package console

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/authlimit"
	"github.com/acmepay/payments/internal/inbound"
	"github.com/acmepay/payments/internal/operations"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/reconcile"
	"github.com/go-chi/chi/v5"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Store holds the console's own reads.
type Store interface {
	PaymentCountByStatus(ctx context.Context) (map[string]int64, error)
	PaymentCountWaitingByAge(ctx context.Context, now time.Time) ([]payment.AgeCount, error)
	EventListByPayment(ctx context.Context, accountID, paymentID string, limit int) ([]payment.Event, error)
	ProviderEventReceiptListByPayment(ctx context.Context, accountID, paymentID string, limit int) ([]inbound.Receipt, error)
	DiscrepancyCountOpenByKind(ctx context.Context) (map[string]int64, error)
	// Sessions and used sign-in forms, by the SHA-256 of their ids.
	ConsoleSessionCreate(ctx context.Context, idHash []byte, actor string, now, expires time.Time) error
	ConsoleSessionGet(ctx context.Context, idHash []byte, now time.Time) (string, error)
	ConsoleSessionDelete(ctx context.Context, idHash []byte) error
	ConsoleSignInFormUse(ctx context.Context, nonceHash []byte, now, expires time.Time) (bool, error)
	// Named operators: the enabled one whose token has this hash, and
	// whether a name is an operator's.
	ConsoleOperatorByTokenHash(ctx context.Context, tokenHash []byte) (string, error)
	ConsoleOperatorNameTaken(ctx context.Context, name string) (bool, error)
	// Search and the overview's charts.
	ConsolePaymentSearch(ctx context.Context, q string, limit int) ([]SearchHit, error)
	ConsoleActivityByHour(ctx context.Context, since time.Time) (Activity, error)
}

// Config wires a Console.
type Config struct {
	Payments *payment.Service
	// Reconciler reconciles a payment for an operator and counts the
	// attempts that need attention.
	Reconciler *reconcile.Reconciler
	Accounts   *account.Service
	// Operations looks at payments of any account, replays and cancels
	// them, and lists and resolves what the audit found.
	Operations *operations.Service
	Store      Store
	Logger     *slog.Logger
	AdminToken string
	// AuthLimiter counts failed sign-ins per client address; the admin
	// API must share it. Nil: one of the console's own.
	AuthLimiter *authlimit.Limiter
	// Now is the clock of sessions; default time.Now.
	Now func() time.Time
	// SessionTTL is how long a sign-in lasts; default 8 h.
	SessionTTL time.Duration
}

// Console serves /console/.
type Console struct {
	cfg        Config
	keys       keys
	pages      map[string]*template.Template
	chartCache chartCache
}

// New checks every dependency; an empty AdminToken is refused, since the
// console exists only when it is set.
func New(c Config) (*Console, error) {
	if c.Payments == nil || c.Reconciler == nil || c.Accounts == nil || c.Operations == nil || c.Store == nil || c.Logger == nil {
		return nil, errors.New("console: payments, reconciler, accounts, operations, store and logger are required")
	}
	if c.AdminToken == "" {
		return nil, errors.New("console: an admin token is required")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = 8 * time.Hour
	}
	if c.AuthLimiter == nil {
		c.AuthLimiter = authlimit.New(authlimit.Config{})
	}
	pages := map[string]*template.Template{}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if n == "templates/layout.html" || n == "templates/partials.html" {
			continue
		}
		t, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", n)
		if err != nil {
			return nil, err
		}
		pages[strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")] = t
	}
	return &Console{cfg: c, keys: newKeys(c.AdminToken), pages: pages}, nil
}

// Handler returns the console's routes, to be mounted at /console.
func (c *Console) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(securityHeaders)
	static, _ := fs.Sub(staticFS, "static")
	r.Handle("/static/*", http.StripPrefix("/console/static/", http.FileServerFS(static)))
	r.Get("/sign-in", c.signInPage)
	r.Post("/sign-in", c.signIn)
	r.Group(func(r chi.Router) {
		r.Use(c.requireSession)
		r.Get("/", c.overview)
		r.Get("/payments", c.stuckList)
		r.Get("/search", c.search)
		r.Get("/payments/{id}", c.paymentPage)
		r.Get("/payments/{id}/{action}", c.confirmPage)
		r.Post("/payments/{id}/{action}", c.act)
		r.Get("/discrepancies", c.discrepancyList)
		r.Get("/discrepancies/{id}/resolve", c.resolvePage)
		r.Post("/discrepancies/{id}/resolve", c.resolve)
		r.Get("/accounts", c.accountsPage)
		r.Post("/accounts", c.createAccount)
		r.Get("/accounts/{id}", c.accountPage)
		r.Post("/accounts/{id}/routing", c.setRouting)
		r.Post("/sign-out", c.signOut)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusNotFound, "message", pageData{Title: "Not found", Message: "There is no such page in the console."})
	})
	return r
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

type sessionKey struct{}

func sessionOf(r *http.Request) session {
	s, _ := r.Context().Value(sessionKey{}).(session)
	return s
}

// requireSession sends anyone not signed in to the sign-in page, whatever
// the method, and refuses a POST without the session's CSRF token. Every
// page view and action that passes is logged with the actor.
func (c *Console) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := c.session(r)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		if s.Actor == "" {
			next := "/console/"
			if r.Method == http.MethodGet {
				next = r.URL.RequestURI()
			}
			http.Redirect(w, r, "/console/sign-in?next="+url.QueryEscape(next), http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if err := r.ParseForm(); err != nil || !validForm(r.PostForm) ||
				!equalTokens(r.PostForm.Get("csrf_token"), c.keys.csrf(s)) {
				c.cfg.Logger.WarnContext(r.Context(), "console form refused: missing or wrong CSRF token",
					slog.String("actor", s.Actor), slog.String("path", r.URL.Path))
				c.render(w, r, http.StatusForbidden, "message", pageData{Title: "Form refused",
					Message: "This form has expired or did not come from this console. Go back, reload the page and try again."})
				return
			}
			if formHasCardNumber(r.PostForm) {
				c.render(w, r, http.StatusBadRequest, "message", pageData{Title: "Form refused", Message: cardRefused})
				return
			}
		}
		r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, s))
		next.ServeHTTP(w, r)
		route := r.URL.Path
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		attrs := []any{slog.String("actor", s.Actor), slog.String("method", r.Method), slog.String("page", route)}
		if id := chi.URLParam(r, "id"); id != "" {
			switch {
			case strings.Contains(route, "/discrepancies/"):
				attrs = append(attrs, slog.String("discrepancy_id", id))
			case strings.Contains(route, "/accounts/"):
				attrs = append(attrs, slog.String("account_id", id))
			default:
				attrs = append(attrs, slog.String("payment_id", id))
			}
		}
		c.cfg.Logger.InfoContext(r.Context(), "console", attrs...)
	})
}

// session is the request's session as the server holds it; no actor when
// there is none (no cookie, signed out, expired).
func (c *Console) session(r *http.Request) (session, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return session{}, nil
	}
	actor, err := c.cfg.Store.ConsoleSessionGet(r.Context(), idHash(ck.Value), c.cfg.Now())
	if payment.ErrorCode(err) == payment.CodeNotFound {
		return session{}, nil
	}
	if err != nil {
		return session{}, err
	}
	return session{Actor: actor, Nonce: ck.Value}, nil
}

func equalTokens(a, b string) bool { return a != "" && len(a) == len(b) && constantEq(a, b) }

// validForm refuses text PostgreSQL cannot store before it reaches a query.
func validForm(v url.Values) bool {
	for k, vs := range v {
		if !payment.ValidText(k) {
			return false
		}
		for _, s := range vs {
			if !payment.ValidText(s) {
				return false
			}
		}
	}
	return true
}

// cardRefused explains a form refused for a card number, without echoing it.
const cardRefused = "A field holds what looks like a card number. Card data is never taken here: remove it and try again."

// formHasCardNumber reports whether a field that is stored or logged (a
// reason, a name, an actor) holds a card number. Tokens and provider
// secrets are credentials, not text, and are not read as card data.
func formHasCardNumber(v url.Values) bool {
	for k, vs := range v {
		switch k {
		case "csrf_token", "idempotency_key", "token", "stripe_secret_key", "webhook_secret":
			continue
		}
		if payment.ContainsCardNumber(k) {
			return true
		}
		for _, s := range vs {
			if payment.ContainsCardNumber(s) {
				return true
			}
		}
	}
	return false
}

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	c.signInForm(w, r, http.StatusOK, pageData{Next: safeNext(r.URL.Query().Get("next"))})
}

// signInForm renders the sign-in page with a fresh form: a nonce cookie
// and a token tied to it and to now, good for one sign-in.
func (c *Console) signInForm(w http.ResponseWriter, r *http.Request, status int, d pageData) {
	nonce := randomToken()
	http.SetCookie(w, cookie(r, signInCookie, nonce, signInFormTTL))
	d.Title, d.CSRF = "Sign in", c.keys.signInCSRF(nonce, c.cfg.Now())
	c.render(w, r, status, "sign-in", d)
}

// signIn checks an operator's token (by its hash) or the admin token (in
// constant time). A refusal says only
// that signing in failed, never which part. An address with too many
// recent failures (here or at the admin API) is refused whatever it sends,
// and each form is good for one try.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	client := c.cfg.AuthLimiter.Client(r)
	if wait, blocked := c.cfg.AuthLimiter.Blocked(client); blocked {
		w.Header().Set("Retry-After", authlimit.RetryAfter(wait))
		c.render(w, r, http.StatusTooManyRequests, "message", pageData{Title: "Too many attempts",
			Message: "Too many failed sign-ins from this address. Wait a minute, then try again."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if ok, err := c.useSignInForm(r); err != nil || !ok {
		if err != nil {
			c.fail(w, r, err)
			return
		}
		c.render(w, r, http.StatusForbidden, "message", pageData{Title: "Form refused",
			Message: "The sign-in form has expired or was already used. Go back, reload the page and try again."})
		return
	}
	actor, d, ok := c.signInActor(w, r, client)
	if !ok {
		return
	}
	id, now := randomToken(), c.cfg.Now()
	if err := c.cfg.Store.ConsoleSessionCreate(r.Context(), idHash(id), actor, now, now.Add(c.cfg.SessionTTL)); err != nil {
		c.fail(w, r, err)
		return
	}
	http.SetCookie(w, cookie(r, sessionCookie, id, c.cfg.SessionTTL))
	http.SetCookie(w, cookie(r, signInCookie, "", -1))
	c.cfg.Logger.InfoContext(r.Context(), "console sign-in", slog.String("actor", actor))
	http.Redirect(w, r, d.Next, http.StatusSeeOther)
}

// signInActor is who signs in: the named operator whose token was given
// (the typed name is not needed), or, with the admin token, the name typed,
// unless it is a named operator's. false: the answer has been written.
func (c *Console) signInActor(w http.ResponseWriter, r *http.Request, client netip.Prefix) (string, pageData, bool) {
	ctx, token := r.Context(), r.PostForm.Get("token")
	actor := strings.TrimSpace(r.PostForm.Get("actor"))
	d := pageData{Next: safeNext(r.PostForm.Get("next")), Actor: actor}
	if payment.ContainsCardNumber(actor) {
		d.Actor, d.Error = "", cardRefused // never shown back
		c.signInForm(w, r, http.StatusBadRequest, d)
		return "", d, false
	}
	if isOperatorToken(token) {
		name, err := c.cfg.Store.ConsoleOperatorByTokenHash(ctx, idHash(token))
		if err == nil {
			return name, d, true
		}
		if payment.ErrorCode(err) != payment.CodeNotFound {
			c.fail(w, r, err)
			return "", d, false
		}
	}
	if !c.keys.tokenMatches(token) {
		if c.cfg.AuthLimiter.Fail(client) {
			c.cfg.Logger.WarnContext(ctx, "admin authentication failures reached the limit", slog.String("client", client.String()))
		}
		c.cfg.Logger.WarnContext(ctx, "console sign-in refused", slog.String("actor", actor))
		d.Error = "Sign-in failed."
		c.signInForm(w, r, http.StatusUnauthorized, d)
		return "", d, false
	}
	if actor == "" || utf8.RuneCountInString(actor) > 100 {
		d.Error = "With the admin token, enter your name (at most 100 characters): it goes into the audit trail of everything you do."
		c.signInForm(w, r, http.StatusBadRequest, d)
		return "", d, false
	}
	taken, err := c.cfg.Store.ConsoleOperatorNameTaken(ctx, actor)
	if err != nil {
		c.fail(w, r, err)
		return "", d, false
	}
	if taken {
		// Nobody signs actions in another operator's name.
		d.Error = "That name belongs to a named operator: sign in with that operator's own token."
		c.signInForm(w, r, http.StatusForbidden, d)
		return "", d, false
	}
	return actor, d, true
}

// useSignInForm checks the posted form's token against its nonce cookie
// and its age, and marks it used: false when it is not good (any more).
func (c *Console) useSignInForm(r *http.Request) (bool, error) {
	ck, ckErr := r.Cookie(signInCookie)
	if err := r.ParseForm(); err != nil || ckErr != nil || !validForm(r.PostForm) {
		return false, nil
	}
	issued, ok := c.keys.signInIssued(r.PostForm.Get("csrf_token"), ck.Value, c.cfg.Now())
	if !ok {
		return false, nil
	}
	return c.cfg.Store.ConsoleSignInFormUse(r.Context(), idHash(ck.Value), c.cfg.Now(), issued.Add(signInFormTTL))
}

// signOut ends the session on the server: the cookie opens nothing after.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	if err := c.cfg.Store.ConsoleSessionDelete(r.Context(), idHash(sessionOf(r).Nonce)); err != nil {
		c.fail(w, r, err)
		return
	}
	http.SetCookie(w, cookie(r, sessionCookie, "", -1))
	http.Redirect(w, r, "/console/sign-in", http.StatusSeeOther)
}

// safeNext keeps a redirect inside the console.
func safeNext(v string) string {
	if !strings.HasPrefix(v, "/console/") || strings.HasPrefix(v, "//") || strings.ContainsAny(v, "\\\r\n") {
		return "/console/"
	}
	return v
}
