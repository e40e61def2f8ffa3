package testsvc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Postgres is a running PostgreSQL 15 cluster of one test: its own initdb
// in a fresh directory under /tmp, listening on 127.0.0.1 and a free port,
// with durability off (fsync, synchronous_commit, full_page_writes) because
// a test's data need not survive a crash. Cold start (initdb + start) takes
// about 2 s on the 2-core machines, a restart 0.1-0.5 s.
//
// One cluster per StartPostgres call, not one per package: a test that
// stops and restarts the database (Stop, Start) must not take the other
// tests' database down with it, and go test runs packages in parallel
// processes that could not share one anyway. A package with many
// PostgreSQL tests amortises the cold start by grouping them as subtests of
// one test over one cluster.
//
// Postgres is not safe for concurrent use: call its methods from the test's
// goroutine.
type Postgres struct {
	// DSN is a libpq URL for the superuser postgres on database postgres
	// (trust authentication, no TLS).
	DSN string
	// Port is the TCP port on 127.0.0.1; Start reuses it.
	Port int

	bin     string // directory of initdb, postgres, psql
	dir     string // the temp root: data/, the socket, the log
	dataDir string
	logPath string
	cred    *syscall.Credential // user postgres when the tests run as root
	cmd     *exec.Cmd
	done    chan struct{}
}

// postgresBinDir finds the PostgreSQL 15 server binaries: LEVEE_PG_BINDIR
// when set, else Debian's location (scripts/install-services.sh installs
// postgresql-15 there).
func postgresBinDir() (string, bool) {
	dir := os.Getenv("LEVEE_PG_BINDIR")
	if dir == "" {
		dir = "/usr/lib/postgresql/15/bin"
	}
	for _, b := range []string{"initdb", "postgres", "psql"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return dir, false
		}
	}
	return dir, true
}

// StartPostgres initialises and starts a PostgreSQL cluster for t and
// removes it in t.Cleanup (also when the start fails half-way). It skips
// the test when PostgreSQL is not installed, or fails it under
// LEVEE_REQUIRE_SERVICES=1 (make test).
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	bin, ok := postgresBinDir()
	if !ok {
		if requireServices() {
			t.Fatalf("PostgreSQL 15 is not installed in %s: run scripts/install-services.sh", bin)
		}
		t.Skipf("PostgreSQL 15 is not installed in %s (scripts/install-services.sh installs it; make test requires it)", bin)
	}
	// Not t.TempDir: that may sit under a directory user postgres cannot
	// reach (/root is mode 700), and the server refuses to run as root.
	dir, err := os.MkdirTemp("/tmp", "levee-pg-")
	if err != nil {
		t.Fatal(err)
	}
	p := &Postgres{bin: bin, dir: dir, dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "postgres.log")}
	t.Cleanup(func() {
		p.Stop()
		_ = os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, PostgreSQL needs the user postgres: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", p.dataDir, "-U", "postgres",
		"--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v: %s", err, out)
	}
	startOnFreePorts(t, "postgres", 1, func(ports []int) error {
		p.Port = ports[0]
		p.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.Port)
		return p.Start()
	})
	return p
}

// Start starts the server on the same port and data directory, after a
// Stop: the database-down half of a test. It returns once the server
// accepts connections (within 30 s), or an error with the server's log.
func (p *Postgres) Start() error {
	if p.running() {
		return nil
	}
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.cmd = exec.Command(filepath.Join(p.bin, "postgres"), "-D", p.dataDir,
		"-p", strconv.Itoa(p.Port), "-k", p.dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=100")
	p.cmd.Stdout, p.cmd.Stderr = log, log
	// Its own process group (a terminal's ^C does not reach it), run as
	// postgres when we are root, and killed if the test binary dies before
	// its cleanup runs.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.cred, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("starting postgres: %w", err)
	}
	p.done = make(chan struct{})
	cmd, done := p.cmd, p.done
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(done)
	}()
	// Ready when postmaster.pid says so (its eighth line, PostgreSQL 10+):
	// the port alone accepts connections before the database can serve.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(filepath.Join(p.dataDir, "postmaster.pid")); err == nil {
			lines := strings.Split(string(b), "\n")
			if len(lines) > 7 && strings.TrimSpace(lines[7]) == "ready" && listensOn(cmd.Process.Pid, p.Port) {
				return nil
			}
		}
		select {
		case <-done:
			out, _ := os.ReadFile(p.logPath)
			return portTakenError(fmt.Errorf("postgres exited at start: %s", out), lastLines(string(out), 5))
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.Stop()
	out, _ := os.ReadFile(p.logPath)
	return fmt.Errorf("postgres did not become ready within 30s: %s", out)
}

func (p *Postgres) running() bool {
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

// Stop shuts the server down (fast shutdown: sessions are terminated, their
// transactions rolled back; then immediate, then SIGKILL if it hangs) and
// waits for it to exit. The data directory is kept for Start.
func (p *Postgres) Stop() {
	if !p.running() {
		return
	}
	pid := p.cmd.Process.Pid
	steps := []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGINT, 10 * time.Second}, {syscall.SIGQUIT, 5 * time.Second}}
	for _, s := range steps {
		_ = syscall.Kill(pid, s.sig)
		select {
		case <-p.done:
			return
		case <-time.After(s.wait):
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-p.done
}

// Exec runs SQL (one or more statements) with psql as the superuser and
// fails t on an error.
func (p *Postgres) Exec(t testing.TB, sql string) {
	t.Helper()
	if _, err := p.psql(sql); err != nil {
		t.Fatal(err)
	}
}

// QueryText runs one query with psql and returns its rows as PostgreSQL
// renders them in text (its own output functions, the session's TimeZone
// and DateStyle defaults), NULL as nil: the reference a driver's decoding
// is compared with.
func (p *Postgres) QueryText(t testing.TB, sql string) [][]*string {
	t.Helper()
	out, err := p.psql(sql)
	if err != nil {
		t.Fatal(err)
	}
	const nullMark = "\x02NULL\x02"
	var rows [][]*string
	for _, rec := range strings.Split(out, "\x1e") {
		if rec == "" || rec == "\n" {
			continue
		}
		var row []*string
		for _, f := range strings.Split(rec, "\x1f") {
			if f == nullMark {
				row = append(row, nil)
				continue
			}
			s := f
			row = append(row, &s)
		}
		rows = append(rows, row)
	}
	return rows
}

func (p *Postgres) psql(sql string) (string, error) {
	cmd := exec.Command(filepath.Join(p.bin, "psql"), "-X", "-q", "-A", "-t",
		"-v", "ON_ERROR_STOP=1", "-F", "\x1f", "-R", "\x1e", "-P", "null=\x02NULL\x02",
		"-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", "postgres", "-d", "postgres")
	cmd.Stdin = strings.NewReader(sql)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return "", err
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return "", fmt.Errorf("psql: %v: %s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return "", errors.New("psql did not finish within 60s")
	}
	return strings.TrimSuffix(stdout.String(), "\n"), nil
}

// lastLines returns the last n lines of s (the log is appended to by every
// start: only the latest start's lines say why it failed).
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// LogText returns the server's log so far (its stderr, every start): a
// test that sets log_statement reads the statements the server ran.
func (p *Postgres) LogText(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
