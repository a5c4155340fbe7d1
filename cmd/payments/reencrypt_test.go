package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
)

var (
	keyA = base64.StdEncoding.EncodeToString([]byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"))
	keyB = base64.StdEncoding.EncodeToString([]byte("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"))
)

// keysEnv is the environment of a command on dbURL with these keys.
func keysEnv(dbURL, key, previous string) func(string) string {
	return env("DATABASE_URL", dbURL, "ENCRYPTION_KEY", key, "ENCRYPTION_KEY_PREVIOUS", previous, "LOG_LEVEL", "error", "STRIPE_API_BASE", simURL())
}

func runCmd(t *testing.T, getenv func(string) string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, getenv, &out, io.Discard)
	return out.String(), err
}

func createAccount(t *testing.T, getenv func(string) string, args ...string) error {
	t.Helper()
	_, err := runCmd(t, getenv, append([]string{"accounts", "create"}, args...)...)
	return err
}

func wantWrongKey(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, account.ErrWrongKey) || !strings.Contains(err.Error(), "ENCRYPTION_KEY") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("%s: err %v, want the one-line wrong-key error", what, err)
	}
}

func TestEncryptionKeyCheckedAtStart(t *testing.T) {
	t.Parallel()
	db := postgrestest.URL(t)
	if err := createAccount(t, keysEnv(db, keyA, ""), "--name", "Loja", "--stripe-key", "sk_test_canary_one"); err != nil {
		t.Fatal(err)
	}
	// A well-formed but wrong key stops every command that needs it,
	// before anything is served or written.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wantWrongKey(t, run(ctx, []string{"serve"}, env("DATABASE_URL", db, "ENCRYPTION_KEY", keyB, "HTTP_ADDR", "127.0.0.1:0"),
		io.Discard, io.Discard), "serve")
	_, err := runCmd(t, keysEnv(db, keyB, ""), "reconcile", "--once")
	wantWrongKey(t, err, "reconcile --once")
	wantWrongKey(t, createAccount(t, keysEnv(db, keyB, ""), "--name", "Outra", "--stripe-key", "sk_test_canary_two"), "accounts create")
	if _, err := runCmd(t, keysEnv(db, keyA, ""), "reconcile", "--once"); err != nil {
		t.Fatalf("the right key: %v", err)
	}
	// The real binary: a non-zero exit and one line on stderr.
	cmd := exec.Command(buildBinary(t, ""), "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+db, "ENCRYPTION_KEY="+keyB, "HTTP_ADDR=127.0.0.1:0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if err == nil || len(lines) != 1 || !strings.Contains(lines[0], "ENCRYPTION_KEY does not decrypt") {
		t.Fatalf("serve with a wrong key: err %v, stderr %q; want one line", err, stderr.String())
	}
}

// A database with accounts from before the canary existed: the first
// start checks the key against a stored secret before it writes the
// canary, so a wrong key cannot become the canary's key.
func TestEncryptionKeyCheckedAgainstSecretsWithoutCanary(t *testing.T) {
	t.Parallel()
	db := postgrestest.URL(t)
	if err := createAccount(t, keysEnv(db, keyA, ""), "--name", "Loja", "--stripe-key", "sk_test_canary_old"); err != nil {
		t.Fatal(err)
	}
	opened, err := openDB(context.Background(), config{DatabaseURL: db})
	if err != nil {
		t.Fatal(err)
	}
	defer opened.Close()
	if _, err := opened.Pool.Exec(context.Background(), `DELETE FROM encryption_canary`); err != nil {
		t.Fatal(err)
	}
	_, err = runCmd(t, keysEnv(db, keyB, ""), "reconcile", "--once")
	wantWrongKey(t, err, "no canary, wrong key")
	var n int
	if err := opened.Pool.QueryRow(context.Background(), `SELECT count(*) FROM encryption_canary`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("canaries after a refused start: %d, %v; want none", n, err)
	}
	if _, err := runCmd(t, keysEnv(db, keyA, ""), "reconcile", "--once"); err != nil {
		t.Fatalf("no canary, right key: %v", err)
	}
}

func reencrypt(t *testing.T, getenv func(string) string) account.ReencryptSummary {
	t.Helper()
	out, err := runCmd(t, getenv, "accounts", "reencrypt")
	if err != nil {
		t.Fatalf("reencrypt: %v", err)
	}
	var sum account.ReencryptSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("reencrypt printed %q: %v", out, err)
	}
	return sum
}

func TestEncryptionKeyRotation(t *testing.T) {
	t.Parallel()
	db := postgrestest.URL(t)
	old, rotating, rotated := keysEnv(db, keyA, ""), keysEnv(db, keyB, keyA), keysEnv(db, keyB, "")
	if err := createAccount(t, old, "--name", "Um", "--stripe-key", "sk_test_rotate_one", "--webhook-secret", "whsec_rotate_one"); err != nil {
		t.Fatal(err)
	}
	if err := createAccount(t, old, "--name", "Dois", "--stripe-key", "sk_test_rotate_two"); err != nil {
		t.Fatal(err)
	}
	// During the rotation both keys open secrets; new ones use the new key.
	if _, err := runCmd(t, rotating, "reconcile", "--once"); err != nil {
		t.Fatalf("rotating: %v", err)
	}
	if err := createAccount(t, rotating, "--name", "Tres", "--stripe-key", "sk_test_rotate_three"); err != nil {
		t.Fatal(err)
	}
	// A secret stored under the old key is still known as taken.
	if err := createAccount(t, rotating, "--name", "Copia", "--stripe-key", "sk_test_rotate_one"); !errors.Is(err, account.ErrCredentialsInUse) {
		t.Fatalf("shared credentials during a rotation: %v, want ErrCredentialsInUse", err)
	}
	if sum := reencrypt(t, rotating); sum != (account.ReencryptSummary{Examined: 3, Reencrypted: 2, Canary: true}) {
		t.Fatalf("first run: %+v, want 3 examined, 2 re-encrypted and the canary", sum)
	}
	if sum := reencrypt(t, rotating); sum != (account.ReencryptSummary{Examined: 3}) {
		t.Fatalf("second run: %+v, want nothing left to do", sum)
	}
	// The old key is no longer needed, and no longer accepted.
	if _, err := runCmd(t, rotated, "reconcile", "--once"); err != nil {
		t.Fatalf("new key alone: %v", err)
	}
	_, err := runCmd(t, old, "reconcile", "--once")
	wantWrongKey(t, err, "old key after the rotation")
	if err := createAccount(t, rotated, "--name", "Copia", "--stripe-key", "sk_test_rotate_one"); !errors.Is(err, account.ErrCredentialsInUse) {
		t.Fatalf("shared credentials after a rotation: %v, want ErrCredentialsInUse", err)
	}
	// Every secret opens with the new key alone.
	opened, err := openDB(context.Background(), config{DatabaseURL: db})
	if err != nil {
		t.Fatal(err)
	}
	defer opened.Close()
	svc, err := openAccounts(context.Background(), opened, config{EncryptionKey: []byte("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := opened.Pool.Query(context.Background(), `SELECT id FROM accounts`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		a, err := svc.Get(context.Background(), id)
		if err != nil || !strings.HasPrefix(a.StripeSecret, "sk_test_rotate_") {
			t.Fatalf("account %s under the new key: %v", id, err)
		}
		if a.Name == "Um" && a.WebhookSecret != "whsec_rotate_one" {
			t.Fatalf("webhook secret after the rotation: %q", a.WebhookSecret)
		}
	}
}

// Two re-encryptions at once re-seal each account exactly once between
// them: each row is re-sealed under its lock, and only if still old.
func TestEncryptionKeyReencryptConcurrently(t *testing.T) {
	t.Parallel()
	db := postgrestest.URL(t)
	const accounts = 20
	for i := range accounts {
		if err := createAccount(t, keysEnv(db, keyA, ""), "--name", "Loja", "--stripe-key", fmt.Sprintf("sk_test_concurrent_%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		sum account.ReencryptSummary
		err error
	}
	results := make(chan result, 2)
	for range 2 {
		go func() {
			var out bytes.Buffer
			err := run(context.Background(), []string{"accounts", "reencrypt"}, keysEnv(db, keyB, keyA), &out, io.Discard)
			var r result
			if r.err = err; err == nil {
				r.err = json.Unmarshal(out.Bytes(), &r.sum)
			}
			results <- r
		}()
	}
	total, canaries := 0, 0
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Fatalf("concurrent reencrypt: %v", r.err)
		}
		total += r.sum.Reencrypted
		if r.sum.Canary {
			canaries++
		}
	}
	if total != accounts || canaries != 1 {
		t.Fatalf("re-encrypted %d accounts and %d canaries between two runs, want %d and 1", total, canaries, accounts)
	}
	if _, err := runCmd(t, keysEnv(db, keyB, ""), "reconcile", "--once"); err != nil {
		t.Fatalf("new key alone: %v", err)
	}
}
