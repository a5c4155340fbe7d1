package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

func (b *bench) header() {
	host, _ := os.Hostname()
	fmt.Fprintf(b.out, "paybench %s on %s: %s/%s, %d CPUs, %s\n", time.Now().UTC().Format(time.RFC3339), host,
		runtime.GOOS, runtime.GOARCH, b.cores, runtime.Version())
	fmt.Fprintf(b.out, "postgres %s\n", b.settings)
	fmt.Fprintf(b.out, "load average at start %s; the machine is shared, so figures are noisy\n", b.loadAvg)
	fmt.Fprintf(b.out, "the service reaches PostgreSQL %s\n", b.svcDB)
	fmt.Fprintf(b.out, "bench database seeded with %d other tenants and %d past payments with their attempts and keys (%s); GET /metrics takes %s\n",
		b.cfg.seedTenants, b.cfg.seedPayments, b.seeded.Round(100*time.Millisecond), b.scrape.Round(time.Millisecond))
	fmt.Fprintf(b.out, "steps of %s after a %s warm-up, the bench database vacuumed before each; clients %v; database %s\n", b.cfg.duration, b.cfg.warmup, b.cfg.clients, b.dbName)
	fmt.Fprintf(b.out, "cpu%% columns: share of one core used by the service (or minimal server) / PostgreSQL (its own processes and the bench database's sessions) / providersim / load generator (paybench, pgbench) / anything else, other people's work included; cpu/req: the first four per request\n")
}

func stepHeader(w io.Writer, first string) {
	fmt.Fprintf(w, "%-12s %7s %9s %8s %8s %8s %7s %7s  %-23s %7s  %s\n",
		first, "clients", "req/s", "p50 ms", "p95 ms", "p99 ms", "errors", "RSS MB", "cpu% svc/pg/sim/gen/oth", "cpu/req", "answers")
}

func stepRow(w io.Writer, name string, s step) {
	rss := "-"
	if s.PeakRSS > 0 {
		rss = fmt.Sprintf("%.1f", float64(s.PeakRSS)/(1<<20))
	}
	answers := outcomes(s.Outcomes)
	if s.Note != "" {
		answers = strings.TrimPrefix(answers+"; "+s.Note, "; ")
	}
	perReq := "-"
	if t := s.Throughput(); t > 0 && s.CPU.Cores > 0 {
		perReq = fmt.Sprintf("%.2fms", 1000*(s.CPU.Service+s.CPU.Postgres+s.CPU.Sim+s.CPU.Gen)/t)
	}
	fmt.Fprintf(w, "%-12s %7d %9.1f %8.2f %8.2f %8.2f %7d %7s  %-23s %7s  %s\n",
		name, s.Clients, s.Throughput(), ms(s.P50), ms(s.P95), ms(s.P99), s.Errors, rss, s.CPU, perReq, answers)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// outcomes lists a step's answers, most frequent first.
func outcomes(m map[string]int) string {
	type kv struct {
		k string
		v int
	}
	var l []kv
	for k, v := range m {
		l = append(l, kv{strings.ReplaceAll(k, "idempotency_key_", ""), v})
	}
	slices.SortFunc(l, func(a, b kv) int { return cmp.Or(b.v-a.v, strings.Compare(a.k, b.k)) })
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = fmt.Sprintf("%s %d", e.k, e.v)
	}
	return strings.Join(parts, ", ")
}

func cmpFloat(a, b float64) int { return cmp.Compare(a, b) }

func pct(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*a/b)
}

func peak(steps []step) step {
	if len(steps) == 0 {
		return step{}
	}
	return slices.MaxFunc(steps, func(x, y step) int { return cmpFloat(x.Throughput(), y.Throughput()) })
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// cpuTargets holds the CPU a create costs each process at 32 clients to
// what the minimal SQL alone needs: the service ≤ 0.30 ms, PostgreSQL ≤
// 0.60 ms.
func (b *bench) cpuTargets(row func(string, string, bool), creates []step) {
	c, ok := b.stepAt(creates, 32)
	if !ok || c.Throughput() == 0 {
		return
	}
	per := func(cores float64) float64 { return 1000 * cores / c.Throughput() }
	svc, pg := per(c.CPU.Service), per(c.CPU.Postgres)
	row("CPU per create, the service ≤ 0.30 ms (32 clients)", fmt.Sprintf("%.2f ms", svc), svc <= 0.30)
	row("CPU per create, PostgreSQL ≤ 0.60 ms (32 clients)", fmt.Sprintf("%.2f ms", pg), pg <= 0.60)
}

// targets prints the ratios and the targets next to the figures; a missed
// target is reported, not failed.
func (b *bench) targets() {
	creates, replays := b.stepsOf("create"), b.stepsOf("replay")
	fmt.Fprintf(b.out, "\nratios service/ceiling at the same concurrency\n")
	fmt.Fprintf(b.out, "%7s %10s %10s %7s   %10s %10s %7s\n", "clients", "create/s", "pgbench/s", "ratio", "replay/s", "minimal/s", "ratio")
	for _, n := range b.cfg.clients {
		c, _ := b.stepAt(creates, n)
		p, _ := b.stepAt(b.pgbench, n)
		r, _ := b.stepAt(replays, n)
		m, _ := b.stepAt(b.minimal, n)
		fmt.Fprintf(b.out, "%7d %10.1f %10.1f %7s   %10.1f %10.1f %7s\n", n,
			c.Throughput(), p.Throughput(), pct(c.Throughput(), p.Throughput()),
			r.Throughput(), m.Throughput(), pct(r.Throughput(), m.Throughput()))
	}
	pc, pp, pr, pm := peak(creates), peak(b.pgbench), peak(replays), peak(b.minimal)
	fmt.Fprintf(b.out, "%7s %10.1f %10.1f %7s   %10.1f %10.1f %7s   (best step of each, pgbench@pool included)\n", "peak",
		pc.Throughput(), pp.Throughput(), pct(pc.Throughput(), pp.Throughput()),
		pr.Throughput(), pm.Throughput(), pct(pr.Throughput(), pm.Throughput()))

	if eight := b.stepsOf("create-8acct"); len(eight) > 0 {
		fmt.Fprintf(b.out, "\none account as a share of eight accounts (create, same load)\n")
		fmt.Fprintf(b.out, "%7s %12s %12s %7s\n", "clients", "1 acct/s", "8 accts/s", "share")
		for _, n := range b.cfg.clients {
			c, _ := b.stepAt(creates, n)
			e, _ := b.stepAt(eight, n)
			fmt.Fprintf(b.out, "%7d %12.1f %12.1f %7s\n", n, c.Throughput(), e.Throughput(), pct(c.Throughput(), e.Throughput()))
		}
	}

	fmt.Fprintf(b.out, "\ntargets (reported, not enforced)\n")
	row := func(name, got string, ok bool) {
		fmt.Fprintf(b.out, "  %-52s %-34s %s\n", name, got, verdict(ok))
	}
	b.cpuTargets(row, creates)
	if c, ok := b.stepAt(creates, 32); ok {
		if p, ok := b.stepAt(b.pgbench, 32); ok && p.Throughput() > 0 {
			r := c.Throughput() / p.Throughput()
			row("create ≥ 60% of pgbench (32 clients)", fmt.Sprintf("%.0f%% (peak to peak %s)", 100*r, pct(pc.Throughput(), pp.Throughput())), r >= 0.6)
		}
		if e, ok := b.stepAt(b.stepsOf("create-8acct"), 32); ok && e.Throughput() > 0 {
			r := c.Throughput() / e.Throughput()
			row("one account ≥ 90% of eight accounts (32 clients)", fmt.Sprintf("%.0f%%", 100*r), r >= 0.9)
		}
	}
	if r, ok := b.stepAt(replays, 32); ok {
		if m, ok := b.stepAt(b.minimal, 32); ok && m.Throughput() > 0 {
			q := r.Throughput() / m.Throughput()
			row("replay ≥ 85% of the minimal server (32 clients)", fmt.Sprintf("%.0f%% (peak to peak %s)", 100*q, pct(pr.Throughput(), pm.Throughput())), q >= 0.85)
		}
	}
	if b.half.N > 0 {
		row("p99 create < 10 ms at half the peak throughput",
			fmt.Sprintf("%.1f ms at %.0f req/s (%d errors)", ms(b.half.P99), b.half.Throughput(), b.half.Errors),
			b.half.P99 < 10*time.Millisecond && b.half.Errors == 0)
	}
	top := slices.Max(b.cfg.clients)
	var rss int64
	for _, s := range b.steps {
		if s.Clients == top {
			rss = max(rss, s.PeakRSS)
		}
	}
	row(fmt.Sprintf("peak RSS < 64 MB at %d clients", top), fmt.Sprintf("%.1f MB (VmHWM, worst workload)", float64(rss)/(1<<20)), rss > 0 && rss < 64<<20)
	if len(b.hist.after) == 2 {
		for i, name := range []string{"replay", "create"} {
			a, z := b.hist.before[i].Throughput(), b.hist.after[i].Throughput()
			row(fmt.Sprintf("%s with %dM keys ≥ 90%% of the figure before", name, b.hist.info.Rows/1_000_000),
				fmt.Sprintf("%s (%.1f → %.1f req/s, %d clients)", pct(z, a), a, z, b.cfg.historyClients), a > 0 && z/a >= 0.9)
		}
	}
	var errs int
	for _, s := range slices.Concat(b.steps, b.pgbench, b.minimal, b.hist.after, []step{b.half}) {
		errs += s.Errors
	}
	fmt.Fprintf(b.out, "  errors across all steps: %d\n", errs)
}
