package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// pgbenchRun is one pgbench step of the create ceiling.
type pgbenchRun struct {
	bin     string
	url     string
	script  string // path of the script file
	vars    map[string]string
	dir     string // where pgbench writes its per-transaction logs
	clients int
	threads int
	d       time.Duration
	run     int // distinguishes the ids of successive steps
}

var (
	tpsLine    = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	failedLine = regexp.MustCompile(`(?m)^number of failed transactions: ([0-9]+)`)
	doneLine   = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)
)

// exec runs pgbench; started is called with its pid once it runs, so the
// caller can sample its CPU.
func (r pgbenchRun) exec(ctx context.Context, started func(pid int)) (step, error) {
	prefix := filepath.Join(r.dir, fmt.Sprintf("pgbench_%d", r.run))
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(r.clients), "-j", strconv.Itoa(r.threads),
		"-T", strconv.Itoa(max(1, int(r.d.Round(time.Second).Seconds()))),
		"-f", r.script, "-l", "--log-prefix", prefix,
		"-D", "run=" + strconv.Itoa(r.run), "-D", "i=0"}
	names := make([]string, 0, len(r.vars))
	for k := range r.vars {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		args = append(args, "-D", k+"="+r.vars[k])
	}
	args = append(args, r.url)
	cmd := exec.CommandContext(ctx, r.bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return step{}, fmt.Errorf("pgbench: %w", err)
	}
	started(cmd.Process.Pid)
	err := cmd.Wait()
	s, perr := parsePgbench(stdout.String())
	if err != nil || perr != nil {
		return s, fmt.Errorf("pgbench: %v %v\n%s\n%s", err, perr, stdout.String(), lastLines(stderr.String(), 10))
	}
	lat, err := pgbenchLatencies(prefix)
	if err != nil {
		return s, err
	}
	s.P50, s.P95, s.P99 = percentile(lat, 0.50), percentile(lat, 0.95), percentile(lat, 0.99)
	s.Clients, s.Conns = r.clients, r.clients
	return s, nil
}

// parsePgbench reads the summary: creates per second (one script run is a
// create), and failures.
func parsePgbench(out string) (step, error) {
	m := tpsLine.FindStringSubmatch(out)
	if m == nil {
		return step{}, fmt.Errorf("no tps in pgbench output")
	}
	tps, _ := strconv.ParseFloat(m[1], 64)
	s := step{Workload: "pgbench"}
	if m := doneLine.FindStringSubmatch(out); m != nil {
		s.N, _ = strconv.Atoi(m[1])
	}
	if tps > 0 {
		s.Elapsed = time.Duration(float64(s.N) / tps * float64(time.Second))
	}
	if m := failedLine.FindStringSubmatch(out); m != nil {
		s.Errors, _ = strconv.Atoi(m[1])
	}
	return s, nil
}

// pgbenchLatencies reads the per-transaction logs (-l): the third field is
// the latency in microseconds, or "failed"/"skipped".
func pgbenchLatencies(prefix string) ([]time.Duration, error) {
	files, err := filepath.Glob(prefix + ".*")
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("pgbench wrote no log under %s", prefix)
	}
	var lat []time.Duration
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 3 {
				continue
			}
			us, err := strconv.ParseInt(fields[2], 10, 64)
			if err != nil {
				continue
			}
			lat = append(lat, time.Duration(us)*time.Microsecond)
		}
		fh.Close()
		os.Remove(f)
	}
	slices.Sort(lat)
	return lat, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// findPgbench returns pgbench from PATH or the Debian layout.
func findPgbench() string {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	if len(m) > 0 {
		slices.Sort(m)
		return m[len(m)-1]
	}
	return "pgbench"
}
