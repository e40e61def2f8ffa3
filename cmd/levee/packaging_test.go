package main

import (
	"bytes"
	"database/sql"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	_ "modernc.org/sqlite" // the examples' SQLite database is made with the driver levee reads it with
)

// repo is the repository's root, from this package's directory.
const repo = "../.."

// exampleFixtures creates in dir what the examples refer to by relative
// path, as their headers' instructions do: the TLS pair, the admin token
// files, the SQLite database with the tables the data example reads (for
// a machine without openssl or sqlite3: TestExamplesValidate).
func exampleFixtures(t *testing.T, dir string) {
	t.Helper()
	os.MkdirAll(filepath.Join(dir, "tls"), 0o700)
	for _, f := range []string{"cert.pem", "key.pem"} {
		b, err := os.ReadFile(filepath.Join(repo, "internal", "config", "testdata", "tls", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "tls", f), b, 0o600)
	}
	os.WriteFile(filepath.Join(dir, "admin-write.token"), []byte("write-token-for-the-example-0123456789\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "admin-read.token"), []byte("read-token-for-the-example-0123456789\n"), 0o600)
	db, err := sql.Open("sqlite", filepath.Join(dir, "shop.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, stmt := range []string{
		`CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL, price REAL NOT NULL)`,
		`CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL, total REAL NOT NULL, created_at TEXT NOT NULL)`,
		`INSERT INTO products VALUES (1, 'hammer', 'tools', 12.5)`,
		`INSERT INTO orders VALUES (1, 42, 12.5, '2026-12-01T10:00:00Z')`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
}

// exampleCommands returns the shell commands an example's header gives to
// make what it reads (certificates, token files, a database): its lines
// "#   $ COMMAND".
func exampleCommands(src string) []string {
	var cmds []string
	for _, m := range regexp.MustCompile(`(?m)^#   \$ (.+)$`).FindAllStringSubmatch(src, -1) {
		cmds = append(cmds, m[1])
	}
	return cmds
}

// TestExamplesValidate: every config under examples/ starts with a
// comment header saying what it is an example of, and `levee validate`
// (the built binary) finds it valid as shipped, run in a new directory
// after the commands its header gives ("#   $ ..."), which make what it
// reads: so the header's instructions are tried too. A machine without a
// command's program (openssl, sqlite3) makes the same files with Go
// instead (exampleFixtures), and says so; under LEVEE_REQUIRE_SERVICES=1
// it fails instead.
func TestExamplesValidate(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repo, "examples", "*.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("want at least 5 examples, found %v (%v)", files, err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(src), "# Example: ") {
				t.Errorf("%s does not start with a \"# Example: ...\" header", name)
			}
			dir := t.TempDir()
			cmds := exampleCommands(string(src))
			missing := ""
			for _, c := range cmds {
				prog, _, _ := strings.Cut(c, " ")
				if _, err := exec.LookPath(prog); err != nil && prog != "mkdir" && prog != "chmod" {
					missing = prog
				}
			}
			switch {
			case missing != "" && os.Getenv("LEVEE_REQUIRE_SERVICES") == "1":
				t.Fatalf("%s is not installed: %s's instructions cannot be tried (scripts/install-services.sh installs it)", missing, name)
			case missing != "":
				t.Logf("%s is not installed: the files %s reads are made with Go instead of its instructions", missing, name)
				exampleFixtures(t, dir)
			default:
				for _, c := range cmds {
					cmd := exec.Command("sh", "-ec", c)
					cmd.Dir = dir
					if out, err := cmd.CombinedOutput(); err != nil {
						t.Fatalf("%s's instruction %q: %v\n%s", name, c, err, out)
					}
				}
			}
			os.WriteFile(filepath.Join(dir, name), src, 0o600)
			cmd := exec.Command(binary, "validate", "-config", name)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil || string(out) != name+": valid\n" {
				t.Errorf("levee validate %s: %v\n%s", name, err, out)
			}
			t.Logf("%s: valid after %d instructions of its header", name, len(cmds))
		})
	}
}

// TestSystemdUnit: deploy/systemd/levee.service has the sandboxing and
// lifecycle the docs promise (SIGHUP reload, which levee does:
// TestSIGHUPReloads), and systemd-analyze verify accepts it with no
// warning (the binary path pointed at the one built for the tests). A
// machine without systemd-analyze skips the verification, and says so;
// under LEVEE_REQUIRE_SERVICES=1 (make test) it fails instead.
func TestSystemdUnit(t *testing.T) {
	unit, err := os.ReadFile(filepath.Join(repo, "deploy", "systemd", "levee.service"))
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(unit), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, want := range []string{
		"ExecStartPre=/usr/local/bin/levee validate -config /etc/levee/levee.yaml",
		"ExecStart=/usr/local/bin/levee run -config /etc/levee/levee.yaml",
		"ExecReload=/bin/kill -HUP $MAINPID",
		"KillSignal=SIGTERM",
		"Restart=on-failure",
		"DynamicUser=yes", "StateDirectory=levee", "WorkingDirectory=/var/lib/levee",
		"ProtectSystem=strict", "NoNewPrivileges=yes", "CapabilityBoundingSet=",
		"LimitNOFILE=65536",
	} {
		if !lines[want] {
			t.Errorf("levee.service lacks %q", want)
		}
	}
	if regexp.MustCompile(`(?m)^AmbientCapabilities=`).Match(unit) {
		t.Errorf("levee.service grants a capability; only a port below 1024 needs one, and it is commented out")
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("LEVEE_REQUIRE_SERVICES") == "1" {
			t.Fatal("systemd-analyze is not installed: levee.service cannot be verified; run scripts/install-services.sh (Debian package systemd)")
		}
		t.Skip("systemd-analyze is not installed on this machine: levee.service was not verified (scripts/install-services.sh installs it; make test requires it)")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "levee.service")
	os.WriteFile(path, bytes.ReplaceAll(unit, []byte("/usr/local/bin/levee"), []byte(binary)), 0o644)
	cmd := exec.Command(analyze, "verify", path)
	out, err := cmd.CombinedOutput()
	var ours []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "levee") {
			ours = append(ours, l)
		}
	}
	if err != nil || len(ours) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	t.Logf("systemd-analyze verify: accepted (%s)", strings.TrimSpace(firstLine(exec.Command(analyze, "--version"))))
}

func firstLine(cmd *exec.Cmd) string {
	out, _ := cmd.Output()
	line, _, _ := strings.Cut(string(out), "\n")
	return line
}

// TestDockerfileBuildsAsMakefile: the image builds levee by running the
// Makefile's `make build`, whose recipe is the one BUILD definition (also
// make release's): static (CGO_ENABLED=0), -trimpath, an empty build id
// and the version stamp (version, commit, date); from the Go of go.mod,
// into a static distroless or scratch image that runs as a non-root user
// the binary it copied; .dockerignore keeps what the build reads (the
// Makefile and the VERSION file included). Where a Docker daemon is not
// running, the image is not built, and the test says so.
func TestDockerfileBuildsAsMakefile(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(repo, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	makefile, dockerfile, gomod, ignore := read("Makefile"), read("Dockerfile"), read("go.mod"), read(".dockerignore")
	if !regexp.MustCompile(`(?m)^RUN make build GO=go `).MatchString(dockerfile) || strings.Contains(dockerfile, "go build") {
		t.Errorf("the Dockerfile does not build with `make build` (or also runs go build itself)")
	}
	if !regexp.MustCompile(`(?m)^build:\n\t\$\(BUILD\) -o bin/levee \./cmd/levee$`).MatchString(makefile) {
		t.Errorf("the Makefile's build recipe is not $(BUILD) -o bin/levee ./cmd/levee")
	}
	if !regexp.MustCompile(`(?m)^\t.*\$\(BUILD\) -o \$\$out \./cmd/levee`).MatchString(makefile) {
		t.Errorf("make release does not build with $(BUILD)")
	}
	def := regexp.MustCompile(`(?m)^BUILD +=(.*)$`).FindStringSubmatch(makefile)
	if def == nil {
		t.Fatal("the Makefile has no BUILD definition")
	}
	for _, w := range []string{"CGO_ENABLED=0 ", " build ", " -trimpath ", "-buildid= ", "-X main.version=$(VERSION) ", "-X main.commit=$(COMMIT) ", "-X main.date=$(DATE)"} {
		if !strings.Contains(def[1], w) {
			t.Errorf("BUILD = %s lacks %q", def[1], w)
		}
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)`).FindStringSubmatch(gomod)[1]
	if !strings.Contains(dockerfile, "FROM golang:"+goVersion+"-") {
		t.Errorf("the builder image is not golang:%s (go.mod's go)", goVersion)
	}
	for _, re := range []string{
		`(?m)^ENV CGO_ENABLED=0 `,
		`(?m)^FROM (gcr\.io/distroless/static\S*|scratch)$`,
		`(?m)^USER (65532|nonroot)`,
		`(?m)^COPY --from=build /out/levee /usr/local/bin/levee$`,
		`(?m)^ENTRYPOINT \["/usr/local/bin/levee"\]$`,
		`(?m)^CMD \["run", "-config", "/etc/levee/levee.yaml"\]$`,
		`(?m)^EXPOSE 8080 9901$`,
	} {
		if !regexp.MustCompile(re).MatchString(dockerfile) {
			t.Errorf("Dockerfile lacks a line matching %s", re)
		}
	}
	if !strings.Contains(usage, "levee run -config FILE") || !strings.Contains(defaultAdminAddr, ":9901") {
		t.Errorf("the image's CMD and EXPOSE follow `levee run -config` and the admin port 9901")
	}
	for _, l := range strings.Split(ignore, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		for _, needed := range []string{"go.mod", "go.sum", "cmd", "internal", "client", "Makefile", "VERSION"} {
			if ok, _ := filepath.Match(l, needed); ok {
				t.Errorf(".dockerignore's %q drops %s, which the build reads", l, needed)
			}
		}
	}
	// The image itself is not built here: no Docker engine runs on these
	// machines (the client alone is installed), and its base images come
	// from registries. TestBinaryIsStatic checks the one thing the
	// distroless static image needs of the binary.
}

// TestBinaryIsStatic: the binary built as the Dockerfile builds it
// (CGO_ENABLED=0) asks for no dynamic loader and no shared library, so it
// runs in the distroless static image, which has neither. (No Docker
// engine runs on the machines the tests run on, so the image itself is
// not built here.)
func TestBinaryIsStatic(t *testing.T) {
	f, err := elf.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("program header %v: the binary is dynamically linked", p.Type)
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		t.Errorf("imported libraries %q", libs)
	}
}

// TestVersion: `levee version` prints "levee vX.Y.Z (commit, date, go)"
// from the stamp the build set (TestMain stamps as the Makefile does),
// the VERSION file holds a semantic version with its v, and the Makefile
// takes the version from git describe's v-tags, falling back to that file.
func TestVersion(t *testing.T) {
	out, err := exec.Command(binary, "version").Output()
	want := "levee " + testVersion + " (0123abcd4567, 2026-12-01T10:00:00Z, " + runtime.Version() + ")\n"
	if err != nil || string(out) != want {
		t.Errorf("levee version = %q (%v), want %q", out, err, want)
	}
	semver := regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`)
	if !semver.MatchString(testVersion) {
		t.Errorf("the test's stamp %q is not what git describe gives after a v-tag", testVersion)
	}
	file, err := os.ReadFile(filepath.Join(repo, "VERSION"))
	if v := strings.TrimSpace(string(file)); err != nil || !semver.MatchString(v) || strings.Contains(v, "-") {
		t.Errorf("VERSION = %q (%v), want a release version vX.Y.Z", file, err)
	}
	mk, err := os.ReadFile(filepath.Join(repo, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "VERSION  ?= $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || cat VERSION)") {
		t.Errorf("the Makefile does not take VERSION from git describe's v-tags, else the VERSION file")
	}
}
