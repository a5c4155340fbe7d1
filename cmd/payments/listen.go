package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// defaultListenAddr is beside the API's 8080; 8090 is the checkout example's.
const defaultListenAddr = "127.0.0.1:8091"

// maxWebhookBody bounds what the receiver reads of one delivery.
const maxWebhookBody = 1 << 20

// webhooksCommand runs `payments webhooks <command>`. It reads no service
// setting: only WEBHOOK_SECRET and PAYMENTS_API_KEY, when their flags are
// not given.
func webhooksCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, groupUsage("webhooks"))
		return usageErrorf("webhooks: a command is required")
	}
	if args[0] != "listen" {
		fmt.Fprint(stderr, groupUsage("webhooks"))
		return usageErrorf("unknown command %q", "webhooks "+args[0])
	}
	fs := flag.NewFlagSet("webhooks listen", flag.ContinueOnError)
	addr := fs.String("addr", defaultListenAddr, "host:port to listen on")
	secret := fs.String("secret", "", "the endpoint's signing secret (whsec_…); default WEBHOOK_SECRET")
	register := fs.Bool("register", false, "register this listener as an endpoint and use its secret")
	apiURL := fs.String("api-url", "http://127.0.0.1:8080", "the service, for --register")
	apiKey := fs.String("api-key", "", "the account's API key, for --register; default PAYMENTS_API_KEY")
	events := fs.String("events", "*", "comma-separated event types to register for, for --register")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	l := listener{stdout: stdout, stderr: stderr, seen: map[string]bool{}}
	if *register {
		if *secret != "" {
			return usageErrorf("webhooks listen: --register uses the secret the service returns; drop --secret")
		}
		if *apiKey == "" {
			*apiKey = getenv("PAYMENTS_API_KEY")
		}
		if *apiKey == "" {
			return usageErrorf("webhooks listen: --register needs --api-key or PAYMENTS_API_KEY")
		}
		u, err := url.Parse(*apiURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageErrorf("webhooks listen: --api-url must be an http(s) URL such as http://127.0.0.1:8080, not %q", *apiURL)
		}
	} else {
		if *secret == "" {
			*secret = getenv("WEBHOOK_SECRET")
		}
		if *secret == "" {
			return usageErrorf("webhooks listen: --secret or WEBHOOK_SECRET is required, or --register to get one (usage: payments webhooks listen %s)", listenSynopsis)
		}
		wh, err := standardwebhooks.NewWebhook(*secret)
		if err != nil {
			// The library's error never quotes the secret.
			return usageErrorf("webhooks listen: the secret is not a whsec_… signing secret: %v", err)
		}
		l.wh = wh
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("webhooks listen: %w", err)
	}
	defer ln.Close()
	self := "http://" + loopbackAddr(ln.Addr().String()) + "/"
	if *register {
		r := registrar{api: strings.TrimRight(*apiURL, "/"), key: *apiKey, client: &http.Client{Timeout: 15 * time.Second}}
		if err := l.registerAt(ctx, r, self, *events, stderr); err != nil {
			return err
		}
	}
	return l.serve(ctx, ln, self, stderr)
}

// registerAt registers self as an endpoint for the comma-separated events
// and verifies with the secret the service returns.
func (l *listener) registerAt(ctx context.Context, r registrar, self, events string, stderr io.Writer) error {
	var evs []string
	for e := range strings.SplitSeq(events, ",") {
		if e = strings.TrimSpace(e); e != "" {
			evs = append(evs, e)
		}
	}
	ep, how, others, err := r.register(ctx, self, evs)
	if err != nil {
		return fmt.Errorf("webhooks listen: register %s with %s: %w", self, r.api, err)
	}
	if l.wh, err = standardwebhooks.NewWebhook(ep.Secret); err != nil {
		return fmt.Errorf("webhooks listen: the service's secret: %w", err)
	}
	fmt.Fprintf(stderr, "webhooks listen: endpoint %s %s at %s for %s\n", ep.ID, how, r.api, strings.Join(ep.EnabledEvents, ","))
	if len(others) > 0 {
		fmt.Fprint(stderr, sameURLWarning(self, others))
	}
	return nil
}

// serve answers deliveries on ln until ctx ends.
func (l *listener) serve(ctx context.Context, ln net.Listener, self string, stderr io.Writer) error {
	hs := &http.Server{Handler: l, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	fmt.Fprintf(stderr, "webhooks listen: listening on %s; verified events on stdout, rejected requests here\n", self)
	select {
	case err := <-errc:
		return fmt.Errorf("webhooks listen: %w", err)
	case <-ctx.Done():
	}
	// A delivery cut short is sent again by the service: no need to wait
	// long, nor for a connection the sender opened and never used.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil {
		_ = hs.Close()
	}
	fmt.Fprintln(stderr, "webhooks listen: stopped")
	return nil
}

const listenSynopsis = "[--addr A] (--secret S | --register [--api-url U] [--api-key K] [--events E])"

// loopbackAddr is addr with a wildcard host made loopback: what the
// service, on this machine, can reach.
func loopbackAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}

// listener verifies each delivery and prints one line per verified event.
type listener struct {
	wh             *standardwebhooks.Webhook
	stdout, stderr io.Writer
	mu             sync.Mutex
	seen           map[string]bool // webhook-ids printed; a repeat is marked, not dropped
}

// event is what the line shows of a delivered event.
type event struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Cursor  string `json:"cursor"`
	Payment *struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Version int64  `json:"version"`
	} `json:"payment"`
	WebhookEndpoint *struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"webhook_endpoint"`
}

func (l *listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxWebhookBody+1))
	if err == nil && len(body) > maxWebhookBody {
		err = errors.New("body larger than 1 MiB")
	}
	if err == nil {
		err = l.wh.Verify(body, r.Header)
	}
	var ev event
	if err == nil {
		if jerr := json.Unmarshal(body, &ev); jerr != nil {
			err = fmt.Errorf("signed, but not a JSON event: %w", jerr)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		fmt.Fprintf(l.stderr, "rejected webhook-id=%q from %s: %v\n", r.Header.Get("webhook-id"), r.RemoteAddr, err)
		http.Error(w, "invalid webhook: "+err.Error(), http.StatusBadRequest)
		return
	}
	var line strings.Builder
	fmt.Fprintf(&line, "%s %s", ev.ID, ev.Type)
	switch {
	case ev.Payment != nil:
		fmt.Fprintf(&line, " payment=%s status=%s version=%d", ev.Payment.ID, ev.Payment.Status, ev.Payment.Version)
	case ev.WebhookEndpoint != nil:
		fmt.Fprintf(&line, " webhook_endpoint=%s status=%s", ev.WebhookEndpoint.ID, ev.WebhookEndpoint.Status)
	}
	fmt.Fprintf(&line, " cursor=%s", ev.Cursor)
	// At least once: a retry or redelivery carries the same webhook-id.
	id := r.Header.Get("webhook-id")
	if l.seen[id] {
		line.WriteString(" (repeat)")
	}
	l.seen[id] = true
	fmt.Fprintln(l.stdout, line.String())
	w.WriteHeader(http.StatusNoContent)
}

// registrar registers the listener with the service's API.
type registrar struct {
	api, key string
	client   *http.Client
}

// endpointView is what the API answers for a webhook endpoint.
type endpointView struct {
	ID            string   `json:"id"`
	URL           string   `json:"url"`
	Status        string   `json:"status"`
	EnabledEvents []string `json:"enabled_events"`
	Secret        string   `json:"secret"`
	// SameURL is in a creation's answer only.
	SameURL []string `json:"same_url_endpoints"`
}

// register makes self an enabled endpoint for events and returns it with
// its secret, and the ids of the account's other endpoints at self. An
// endpoint already at self (an earlier run) gets a new secret instead of a
// sibling: a second endpoint would sign with a secret this run does not
// know, and every delivery to it would be refused.
func (r registrar) register(ctx context.Context, self string, events []string) (endpointView, string, []string, error) {
	existing, err := r.find(ctx, self)
	if err != nil {
		return endpointView{}, "", nil, err
	}
	if len(existing) == 0 {
		// Another run may have registered self since the lookup: the
		// creation's answer names such siblings.
		var ep endpointView
		err := r.do(ctx, http.MethodPost, "/v1/webhook_endpoints", map[string]any{
			"url": self, "enabled_events": events, "description": "payments webhooks listen",
		}, http.StatusCreated, &ep)
		return ep, "registered", ep.SameURL, err
	}
	var others []string
	for _, o := range existing[1:] {
		others = append(others, o.ID)
	}
	id := existing[0].ID
	var ep endpointView
	if err := r.do(ctx, http.MethodPatch, "/v1/webhook_endpoints/"+id,
		map[string]any{"enabled": true, "enabled_events": events}, http.StatusOK, &ep); err != nil {
		return endpointView{}, "", nil, err
	}
	if err := r.do(ctx, http.MethodPost, "/v1/webhook_endpoints/"+id+"/rotate_secret",
		map[string]any{}, http.StatusOK, &ep); err != nil {
		return endpointView{}, "", nil, err
	}
	return ep, "reused (secret rotated)", others, nil
}

// sameURLWarning is the line that names the other endpoints at self: each
// signs with its own secret, so this listener refuses their deliveries.
func sameURLWarning(self string, others []string) string {
	return fmt.Sprintf("webhooks listen: warning: %d other endpoint(s) also deliver to %s, signed with secrets this listener does not know, so their deliveries are refused here: %s (delete them with DELETE /v1/webhook_endpoints/{id})\n",
		len(others), self, strings.Join(others, ", "))
}

// find returns the account's endpoints whose URL is url, by id.
func (r registrar) find(ctx context.Context, url string) ([]endpointView, error) {
	var found []endpointView
	after := ""
	for {
		var page struct {
			Data    []endpointView `json:"data"`
			HasMore bool           `json:"has_more"`
		}
		path := "/v1/webhook_endpoints?limit=100"
		if after != "" {
			path += "&starting_after=" + after
		}
		if err := r.do(ctx, http.MethodGet, path, nil, http.StatusOK, &page); err != nil {
			return nil, err
		}
		for i := range page.Data {
			if page.Data[i].URL == url {
				found = append(found, page.Data[i])
			}
		}
		if !page.HasMore || len(page.Data) == 0 {
			return found, nil
		}
		after = page.Data[len(page.Data)-1].ID
	}
}

// do sends one API request and decodes the answer into out. Writes carry
// a fresh Idempotency-Key. An error quotes the service's problem detail,
// never the API key.
func (r registrar) do(ctx context.Context, method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.api+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", newIdempotencyKey())
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	name := method + " " + strings.SplitN(path, "?", 2)[0]
	if resp.StatusCode != want {
		var p struct {
			Detail string `json:"detail"`
			Code   string `json:"code"`
			Errors []struct {
				Field   string `json:"field"`
				Message string `json:"message"`
			} `json:"errors"`
		}
		if json.Unmarshal(b, &p) == nil && p.Detail != "" {
			msg := fmt.Sprintf("%s answered %d %s: %s", name, resp.StatusCode, p.Code, p.Detail)
			for _, f := range p.Errors {
				msg += fmt.Sprintf("; %s: %s", f.Field, f.Message)
				if f.Field == "url" {
					msg += " (a local URL needs WEBHOOK_ALLOW_PRIVATE=true on the service)"
				}
			}
			return errors.New(msg)
		}
		return fmt.Errorf("%s answered %s", name, resp.Status)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func newIdempotencyKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "webhooks-listen-" + hex.EncodeToString(b)
}
