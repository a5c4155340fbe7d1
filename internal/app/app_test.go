package app_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/app"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
)

var key = []byte("0123456789abcdef0123456789abcdef")

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		cfg  app.Config
		want string
	}{
		"NoDatabaseURL":   {app.Config{EncryptionKey: key}, "database URL"},
		"ShortKey":        {app.Config{DatabaseURL: "postgres://127.0.0.1:1/x", EncryptionKey: key[:16]}, "encryption key"},
		"NegativeRate":    {app.Config{DatabaseURL: "postgres://127.0.0.1:1/x", EncryptionKey: key, AuditRate: -1}, "audit rate"},
		"NoDatabaseThere": {app.Config{DatabaseURL: "postgres://127.0.0.1:1/x?connect_timeout=1", EncryptionKey: key}, "postgres"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a, err := app.New(context.Background(), c.cfg)
			if err == nil {
				a.Close()
				t.Fatal("New accepted the config")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not name %q", err, c.want)
			}
		})
	}
}

func TestNewBuildsAndRuns(t *testing.T) {
	t.Parallel()
	url := postgrestest.URL(t)
	a, err := app.New(context.Background(), app.Config{DatabaseURL: url, EncryptionKey: key, AdminToken: strings.Repeat("a", 32),
		ProviderTimeout: time.Second, InProgressLease: 5 * time.Second, AuditRate: 10,
		DBStatementTimeout: 5 * time.Second, DBLockTimeout: 2 * time.Second, DBIdleInTransactionTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer a.Close()
	if a.Payments == nil || a.Accounts == nil || a.Operations == nil || a.Reconciler == nil || a.Purger == nil || a.WebhookWorker == nil {
		t.Fatalf("New left a part unbuilt: %+v", a)
	}
	for path, want := range map[string]int{"/healthz": http.StatusOK, "/readyz": http.StatusOK, "/metrics": http.StatusOK} {
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Fatalf("GET %s = %d, want %d: %s", path, rec.Code, want, rec.Body)
		}
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := a.Start(context.Background()); err == nil {
		t.Fatal("a second Start was accepted")
	}
	a.Stop()
	a.Stop() // a second Stop is harmless
}

// A wrong encryption key is refused before anything is served.
func TestNewRefusesWrongKey(t *testing.T) {
	t.Parallel()
	url := postgrestest.URL(t)
	a, err := app.New(context.Background(), app.Config{DatabaseURL: url, EncryptionKey: key, SkipMigrations: true})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	a.Close()
	other := []byte(strings.Repeat("b", 32))
	if a, err := app.New(context.Background(), app.Config{DatabaseURL: url, EncryptionKey: other, SkipMigrations: true}); err == nil {
		a.Close()
		t.Fatal("New accepted a key that does not open the canary")
	}
}
