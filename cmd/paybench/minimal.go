package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// serveMinimal is the replay ceiling: net/http and a pgx pool of the same
// default size as the service's, answering POST /v1/payments with the single
// indexed read a replay needs and nothing else (no authentication, routing,
// validation, logging or metrics). It prints "listening on http://ADDR".
func serveMinimal(args []string) error {
	fs := flag.NewFlagSet("minimal-server", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	dbURL := fs.String("database-url", "", "the bench database")
	accountID := fs.String("account", "", "the account whose keys are read")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return err
	}
	get := query("ReplayResponseGet")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		sum := sha256.Sum256([]byte(r.Header.Get("Idempotency-Key")))
		var status int32
		var body []byte
		err := pool.QueryRow(r.Context(), get, *accountID, sum[:]).Scan(&status, &body)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			http.Error(w, `{"code":"not_found"}`, http.StatusNotFound)
			return
		case err != nil:
			http.Error(w, `{"code":"internal"}`, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(int(status))
		_, _ = w.Write(body)
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Printf("minimal server listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}
