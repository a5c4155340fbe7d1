package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.50, 50 * time.Millisecond}, {0.95, 95 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		if got := percentile(d, c.p); got != c.want {
			t.Errorf("percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 0.99); got != 0 {
		t.Errorf("percentile of nothing = %v, want 0", got)
	}
}

func TestParsePgbench(t *testing.T) {
	t.Parallel()
	out := `pgbench (15.20 (Debian 15.20-0+deb12u1))
transaction type: pgbench_create.sql
number of clients: 8
number of transactions actually processed: 422
number of failed transactions: 3 (0.706%)
latency average = 56.879 ms
initial connection time = 46.063 ms
tps = 140.649039 (without initial connection time)
`
	s, err := parsePgbench(out)
	if err != nil {
		t.Fatal(err)
	}
	if s.N != 422 || s.Errors != 3 {
		t.Errorf("N, Errors = %d, %d; want 422, 3", s.N, s.Errors)
	}
	if got := s.Throughput(); got < 140.6 || got > 140.7 {
		t.Errorf("throughput %v, want 140.649", got)
	}
	if _, err := parsePgbench("pgbench: error: connection refused\n"); err == nil {
		t.Error("an aborted run parsed without error")
	}
}

func TestPgbenchLatencies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prefix := filepath.Join(dir, "pgbench_1")
	must(t, os.WriteFile(prefix+".100", []byte("0 1 2500 0 1796208861 825158\n1 1 failed 0 1796208861 832903\n"), 0o644))
	must(t, os.WriteFile(prefix+".100.1", []byte("2 1 1500 0 1796208861 840512\n"), 0o644))
	lat, err := pgbenchLatencies(prefix)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{1500 * time.Microsecond, 2500 * time.Microsecond}
	if len(lat) != 2 || lat[0] != want[0] || lat[1] != want[1] {
		t.Errorf("latencies %v, want %v", lat, want)
	}
}

func TestQueries(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"BenchDatabaseCreate", "BenchDatabaseDrop", "ConnectionsFree", "ReplayResponseGet",
		"HistoryInsert", "HistoryConstraintAdd", "HistoryIndexReset", "HistoryIndexCreate", "PayloadSamples"} {
		if q := queries[name]; q == "" || strings.Contains(q, "-- name:") || strings.HasSuffix(q, ";") {
			t.Errorf("query %s = %q", name, q)
		}
	}
	if got, want := query("BenchDatabaseCreate", "db", `bench_"x`), `CREATE DATABASE "bench_""x"`; got != want {
		t.Errorf("identifier not quoted: %s, want %s", got, want)
	}
	if got, want := query("HistoryIndexCreate", "def", "CREATE INDEX i ON t (c)"), "CREATE INDEX i ON t (c)"; got != want {
		t.Errorf("definition: %s, want %s", got, want)
	}
}

func TestIsOtherSession(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		title string
		other bool
	}{
		{"postgres: 15/main: checkpointer   ", false},
		{"postgres: 15/main: autovacuum worker chaos_1", false},
		{"postgres: 15/main: postgres bench_ab12 127.0.0.1(5432) idle", false},
		{"postgres: 15/main: postgres chaos_1 127.0.0.1(5432) idle", true},
		{"postgres: 15/main: postgres bench_ab123 [local] idle", true},
	} {
		if got := isOtherSession(c.title, "bench_ab12"); got != c.other {
			t.Errorf("isOtherSession(%q) = %v, want %v", c.title, got, c.other)
		}
	}
}

func TestTicksOf(t *testing.T) {
	t.Parallel()
	stat := "1234 (postgres: a b) S 1 1234 1234 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 1 0 100 0"
	if got := ticksOf(stat); got != 325 {
		t.Errorf("ticks %d, want 325", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
