// Command checkout is the example backend of a checkout page: it serves
// index.html, holds the merchant's API key (the browser never sees it),
// creates payments through the payments service and relays their state for
// the page's polling. Standard library only; see README.md.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"
)

//go:embed index.html
var indexHTML []byte

func main() {
	cfg := config{
		API:    strings.TrimSuffix(getenv("PAYMENTS_API", "http://127.0.0.1:8080"), "/"),
		APIKey: os.Getenv("PAYMENTS_API_KEY"),
	}
	addr := getenv("CHECKOUT_ADDR", "127.0.0.1:8090")
	if cfg.APIKey == "" {
		log.Fatal("checkout: set PAYMENTS_API_KEY to the merchant's API key (make run prints the demo one)")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal("checkout: ", err)
	}
	log.Printf("checkout page on http://%s (payments service %s)", ln.Addr(), cfg.API)
	srv := &http.Server{Handler: newHandler(cfg), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal("checkout: ", err)
	}
}

func getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

type config struct {
	API    string // the payments service's base URL
	APIKey string // the merchant's secret API key
	// Client calls the service; default a client with a 30 s timeout.
	Client *http.Client
}

// The checkout's cart: one fixed item, in BRL minor units.
const (
	amount   = 4990
	currency = "BRL"
)

var (
	paymentIDPattern = regexp.MustCompile(`^pay_[A-Za-z0-9]+$`)
	orderIDPattern   = regexp.MustCompile(`^pedido-[0-9a-f]+$`)
)

func newHandler(cfg config) http.Handler {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 30 * time.Second}
	}
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(indexHTML)
	})
	m.HandleFunc("POST /checkout/payments", cfg.createPayment)
	m.HandleFunc("GET /checkout/payments/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if !paymentIDPattern.MatchString(id) {
			http.Error(w, "bad payment id", http.StatusBadRequest)
			return
		}
		cfg.relay(w, r, http.MethodGet, "/v1/payments/"+id, nil, "")
	})
	// After a 3-D Secure redirect the page knows only its order id.
	m.HandleFunc("GET /checkout/orders/{order}/payments", func(w http.ResponseWriter, r *http.Request) {
		order := r.PathValue("order")
		if !orderIDPattern.MatchString(order) {
			http.Error(w, "bad order id", http.StatusBadRequest)
			return
		}
		cfg.relay(w, r, http.MethodGet, "/v1/payments?order_id="+url.QueryEscape(order), nil, "")
	})
	return m
}

// createPayment makes a new order and its payment. The browser chooses only
// the method; amount, currency and return_url are the merchant's.
func (cfg config) createPayment(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Method string `json:"method"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<10)).Decode(&in); err != nil {
		http.Error(w, "want {\"method\":\"pix\"|\"card_3ds\"}", http.StatusBadRequest)
		return
	}
	// Two halves joined by a letter: sixteen random hex characters can be
	// a Luhn-valid run of decimal digits, which the service refuses as a
	// card number.
	order := "pedido-" + randomHex(4) + "a" + randomHex(4)
	body := map[string]any{"order_id": order, "amount": amount, "currency": currency,
		"description": "Checkout example"}
	switch in.Method {
	case "pix":
		body["payment_method"] = "pix"
		body["expires_in"] = 900 // seconds
	case "card_3ds":
		// A test card that always asks for 3-D Secure. The customer comes
		// back to this page, which finds the payment by its order.
		body["payment_method"] = "pm_card_threeDSecure2Required"
		body["return_url"] = "http://" + r.Host + "/?order_id=" + order
	default:
		http.Error(w, "method: want pix or card_3ds", http.StatusBadRequest)
		return
	}
	b, _ := json.Marshal(body)
	// One key per order: a retry after a lost answer reuses it and gets the
	// same payment (and the same QR code) instead of a second one.
	cfg.relay(w, r, http.MethodPost, "/v1/payments", b, randomHex(16))
}

// relay calls the service and copies its JSON answer (status and body) to
// the browser. A create is retried with the same Idempotency-Key when the
// service could not be reached or answered 5xx.
func (cfg config) relay(w http.ResponseWriter, r *http.Request, method, path string, body []byte, key string) {
	attempts := 1
	if key != "" {
		attempts = 3
	}
	var (
		res *http.Response
		err error
	)
	for i := range attempts {
		if i > 0 {
			time.Sleep(time.Duration(i) * 500 * time.Millisecond)
		}
		req, rerr := http.NewRequestWithContext(r.Context(), method, cfg.API+path, bytes.NewReader(body))
		if rerr != nil {
			http.Error(w, rerr.Error(), http.StatusInternalServerError)
			return
		}
		req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
		}
		res, err = cfg.Client.Do(req)
		if err == nil && res.StatusCode < 500 {
			break
		}
		if err == nil && i < attempts-1 {
			res.Body.Close()
		}
	}
	if err != nil {
		// The error names the URL, never the key or the body.
		log.Printf("checkout: %s %s: %v", method, path, err)
		writeJSON(w, http.StatusBadGateway, map[string]any{"error": map[string]string{
			"code": "service_unreachable", "message": "the payments service did not answer"}})
		return
	}
	defer res.Body.Close()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(res.StatusCode)
	io.Copy(w, io.LimitReader(res.Body, 1<<20))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b)
}
