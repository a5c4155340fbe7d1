package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/acmepay/payments/internal/postgres/pgxid"
)

// moduleRoot finds the directory of go.mod from the working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("chaos: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// buildBinaries builds the real payments and providersim binaries into dir.
func buildBinaries(ctx context.Context, root, dir string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), "./cmd/payments", "./cmd/providersim")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("chaos: go build: %v\n%s", err, out)
	}
	return nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// proc is one child process: the simulator or a `payments serve` replica.
// It can be killed and started again on the same address.
type proc struct {
	name string
	bin  string
	args []string
	env  []string
	addr string // host:port it listens on
	// health is the path answered once the process serves.
	health string
	log    *os.File

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd exits
}

func (p *proc) url() string { return "http://" + p.addr }

// start launches the process and waits until its health path answers.
func (p *proc) start(ctx context.Context) error {
	p.mu.Lock()
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	// Its own process group: a Ctrl-C to the terminal reaches this program,
	// which then stops its children itself; Pdeathsig stops them if this
	// program dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return fmt.Errorf("chaos: start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	go func() { _ = cmd.Wait(); close(done) }()

	deadline := time.Now().Add(60 * time.Second)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get(p.url() + p.health)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("chaos: %s exited before serving (log: %s)", p.name, p.log.Name())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: %s did not serve within 60s (log: %s)", p.name, p.log.Name())
		}
	}
}

// running reports whether the process is up.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signal sends sig and waits up to wait for the exit, then SIGKILLs.
func (p *proc) signal(sig syscall.Signal, wait time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
	}
}

// kill is a crash: SIGKILL, no draining.
func (p *proc) kill() { p.signal(syscall.SIGKILL, 10*time.Second) }

// stop is a graceful stop: SIGTERM drains in-flight requests.
func (p *proc) stop() { p.signal(syscall.SIGTERM, 15*time.Second) }

// privatePostgres is a throwaway cluster this program initialises, starts
// just below an xid8 boundary, maybe restarts once, and removes. Only such
// a cluster is ever restarted.
type privatePostgres struct {
	dir    string
	data   string
	port   string
	pgCtl  string
	asUser []string // runuser prefix when running as root
	log    io.Writer
}

func findPGBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) > 0 {
		return matches[len(matches)-1], nil
	}
	return "", fmt.Errorf("chaos: %s not found: the run needs the PostgreSQL server programs for its private cluster (or -shared-pg)", name)
}

// startPrivatePostgres initialises a cluster under dir and starts it on a
// free port with fsync off.
func startPrivatePostgres(ctx context.Context, dir string, log io.Writer) (*privatePostgres, error) {
	initdb, err := findPGBin("initdb")
	if err != nil {
		return nil, err
	}
	pgCtl, err := findPGBin("pg_ctl")
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	pg := &privatePostgres{dir: dir, data: filepath.Join(dir, "data"), port: port, pgCtl: pgCtl, log: log}
	if os.Geteuid() == 0 {
		// initdb and postgres refuse to run as root.
		pg.asUser = []string{"runuser", "-u", "postgres", "--"}
		if err := os.Chmod(dir, 0o777); err != nil {
			return nil, err
		}
		// The cluster owner must be able to reach dir through its parents.
		for d := filepath.Dir(dir); d != "/" && d != "."; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
				return nil, fmt.Errorf("chaos: %s is not searchable by user postgres; set TMPDIR elsewhere", d)
			}
		}
	}
	if err := pg.run(ctx, initdb, "-D", pg.data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		return nil, fmt.Errorf("chaos: initdb: %w", err)
	}
	if err := pg.start(ctx); err != nil {
		return nil, err
	}
	return pg, nil
}

func (pg *privatePostgres) start(ctx context.Context) error {
	if err := pg.run(ctx, pg.pgCtl, "-D", pg.data, "-l", filepath.Join(pg.dir, "postgres.log"), "-w", "-t", "60", "-o", pg.opts(), "start"); err != nil {
		return fmt.Errorf("chaos: pg_ctl start: %w", err)
	}
	return nil
}

func (pg *privatePostgres) opts() string {
	return fmt.Sprintf("-p %s -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100", pg.port, pg.dir)
}

func (pg *privatePostgres) url() string {
	return "postgres://postgres@127.0.0.1:" + pg.port + "/postgres?sslmode=disable"
}

func (pg *privatePostgres) run(ctx context.Context, bin string, args ...string) error {
	all := append(append([]string{}, pg.asUser...), bin)
	all = append(all, args...)
	cmd := exec.CommandContext(ctx, all[0], all[1:]...)
	cmd.Stdout, cmd.Stderr = pg.log, pg.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd.Run()
}

// moveXid moves the cluster's next transaction id forward to next, before
// the run's database exists (pgxid).
func (pg *privatePostgres) moveXid(ctx context.Context, next uint64) error {
	resetwal, err := findPGBin("pg_resetwal")
	if err != nil {
		return err
	}
	run := func(bin string, args ...string) error { return pg.run(ctx, bin, args...) }
	c := pgxid.Cluster{URL: pg.url(), DataDir: pg.data, PgResetwal: resetwal, Run: run,
		Stop:  func() error { return run(pg.pgCtl, "-D", pg.data, "-m", "fast", "-w", "-t", "60", "stop") },
		Start: func() error { return pg.start(ctx) },
	}
	if err := c.MoveTo(ctx, next); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	return nil
}

// restart is a crash and recovery: immediate shutdown (no checkpoint), then
// start again with the same options.
func (pg *privatePostgres) restart(ctx context.Context) error {
	if err := pg.run(ctx, pg.pgCtl, "-D", pg.data, "-m", "immediate", "-w", "-t", "60", "restart"); err != nil {
		return fmt.Errorf("chaos: pg_ctl restart: %w", err)
	}
	return nil
}

func (pg *privatePostgres) stop() {
	_ = pg.run(context.Background(), pg.pgCtl, "-D", pg.data, "-m", "immediate", "-w", "stop")
}
