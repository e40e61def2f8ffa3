package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// completionScript runs the built binary's "completion shell".
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	out, err := exec.Command(binary, "completion", shell).Output()
	if err != nil {
		t.Fatalf("levee completion %s: %v", shell, err)
	}
	return string(out)
}

// TestCompletionScripts: each shell's script names every command, every
// apps command and every flag of every flag set, and is valid syntax for
// its shell (bash -n, zsh -n, fish -n; scripts/install-services.sh
// installs zsh and fish, and a shell missing fails the test).
func TestCompletionScripts(t *testing.T) {
	var want []string
	for _, c := range commands {
		want = append(want, c.name)
		want = append(want, c.subs...)
		all, _ := flagNames(flagsOf(c))
		want = append(want, all...)
		for _, s := range c.subs {
			all, _ := flagNames(c.sub(s))
			want = append(want, all...)
		}
	}
	for _, shell := range shells {
		t.Run(shell, func(t *testing.T) {
			script := completionScript(t, shell)
			for _, w := range want {
				name := strings.TrimPrefix(w, "-")
				if !regexp.MustCompile(`(^|[\s"'|-])` + regexp.QuoteMeta(name) + `($|[\s"')|])`).MatchString(script) {
					t.Errorf("the %s script does not offer %s", shell, w)
				}
			}
			path, err := exec.LookPath(shell)
			if err != nil {
				t.Fatalf("%s is not installed: its script's syntax cannot be checked (%s -n); run scripts/install-services.sh", shell, shell)
			}
			cmd := exec.Command(path, "-n")
			cmd.Stdin = strings.NewReader(script)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s\n%s", shell, err, out, script)
			}
		})
	}
	var stderr bytes.Buffer
	if code := run([]string{"completion", "tcsh"}, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "bash|zsh|fish") {
		t.Errorf("completion tcsh: exit %d, %q", code, stderr.String())
	}
}

// TestBashCompletionCompletes runs the bash function as bash would on
// partial command lines.
func TestBashCompletionCompletes(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash is needed: ", err)
	}
	script := completionScript(t, "bash")
	for _, c := range []struct {
		line string // the words typed, the last being completed
		want []string
	}{
		{"levee va", []string{"validate"}},
		{"levee ", []string{"run", "validate", "demo", "apps", "drill", "completion", "data-apis", "version"}},
		{"levee data-apis pu", []string{"publish"}},
		{"levee data-apis create -", []string{"-admin", "-config", "-f", "-token-file"}},
		{"levee run -", []string{"-config"}},
		{"levee apps key-", []string{"key-create", "key-revoke"}},
		{"levee apps list -a", []string{"-admin", "-after", "-all"}},
		{"levee completion f", []string{"fish"}},
		{"levee validate -config levee.ya", []string{"levee.yaml"}},
	} {
		words := strings.Split(c.line, " ")
		var arr strings.Builder
		for _, w := range words {
			arr.WriteString(" '" + w + "'")
		}
		prog := script + "\nCOMP_WORDS=(" + arr.String() + ")\nCOMP_CWORD=" + strconv.Itoa(len(words)-1) +
			"\n_levee\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "levee.yaml"), nil, 0o600)
		cmd := exec.Command("bash", "-c", prog)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", c.line, err, out)
		}
		got := strings.Fields(string(out))
		if !slices.Equal(got, c.want) {
			t.Errorf("%q completes to %q, want %q", c.line, got, c.want)
		}
	}
}

// TestFishCompletionCompletes asks fish itself what the fish script
// offers on partial command lines (complete -C), compared as sets (fish
// sorts and may add descriptions after a tab).
func TestFishCompletionCompletes(t *testing.T) {
	if _, err := exec.LookPath("fish"); err != nil {
		t.Fatal("fish is needed (scripts/install-services.sh installs it): ", err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "levee.fish")
	if err := os.WriteFile(script, []byte(completionScript(t, "fish")), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ line, want string }{
		{"levee va", "validate"},
		{"levee ", "apps completion data-apis demo drill run validate version"},
		{"levee data-apis pu", "publish"},
		{"levee run -", "-config"},
		{"levee apps key-", "key-create key-revoke"},
		{"levee completion f", "fish"},
	} {
		cmd := exec.Command("fish", "--no-config", "-c", "source $argv[1]; complete -C $argv[2]", script, c.line)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", c.line, err, out)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			got = append(got, strings.SplitN(l, "\t", 2)[0])
		}
		slices.Sort(got)
		want := strings.Fields(c.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%q completes to %q, want %q", c.line, got, want)
		}
	}
}

// TestCommandsMatchUsage: the completion's command table lists exactly
// the commands the usage text lists, in its order, and run dispatches
// each of them (none is an unknown command).
func TestCommandsMatchUsage(t *testing.T) {
	var inUsage []string
	for _, m := range regexp.MustCompile(`(?m)^  levee ([a-z-]+)`).FindAllStringSubmatch(usage, -1) {
		inUsage = append(inUsage, m[1])
	}
	var inTable []string
	for _, c := range commands {
		inTable = append(inTable, c.name)
		var stderr bytes.Buffer
		run([]string{c.name, "-h"}, &bytes.Buffer{}, &stderr)
		if strings.Contains(stderr.String(), "unknown command") {
			t.Errorf("%s: %s", c.name, stderr.String())
		}
	}
	if !slices.Equal(inUsage, inTable) {
		t.Errorf("usage lists %v, the completion table %v", inUsage, inTable)
	}
	for _, s := range appsCommands {
		if !strings.Contains(appsUsage, "  "+s+" ") {
			t.Errorf("apps command %s is not in appsUsage", s)
		}
	}
}

// TestValidateStdin: "-config -" reads the configuration from standard
// input with the same verdict and problem lines as from a file, and a
// relative path in it resolves against the working directory.
func TestValidateStdin(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"cert.pem", "key.pem"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "internal", "config", "testdata", "tls", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o600)
	}
	const good = `listen: 127.0.0.1:8443
tls: {cert_file: cert.pem, key_file: key.pem}
admin: {listen: 127.0.0.1:9901}
upstreams:
  api: {endpoints: [{address: 127.0.0.1:9001}]}
routes:
  - {name: api, upstream: api}
`
	const bad = `listen: 127.0.0.1:8080
admin: {listen: 127.0.0.1:9901}
upstreams:
  api: {endpoints: [{address: 127.0.0.1:9001, weight: "abc"}]}
routes:
  - {name: api, upstream: apii}
`
	validate := func(wd, config string, stdin bool) (int, string, string) {
		args := []string{"validate", "-config", "-"}
		cmd := exec.Command(binary)
		if stdin {
			cmd.Stdin = strings.NewReader(config)
		} else {
			p := filepath.Join(t.TempDir(), "levee.yaml")
			os.WriteFile(p, []byte(config), 0o600)
			args[2] = p
		}
		cmd.Args = append(cmd.Args, args...)
		cmd.Dir = wd
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		// Each problem is placed in the file it was read from: from a
		// file and from stdin alike but for that name.
		return code, stdout.String(), strings.ReplaceAll(stderr.String(), args[2]+":", "standard input:")
	}
	if code, out, errOut := validate(dir, good, true); code != 0 || out != "standard input: valid\n" {
		t.Errorf("good config on stdin: exit %d, %q %q", code, out, errOut)
	}
	// From another directory, cert.pem is not there: relative to the
	// working directory, from a file or from stdin alike.
	elsewhere := t.TempDir()
	codeIn, _, errIn := validate(elsewhere, good, true)
	codeFile, _, errFile := validate(elsewhere, good, false)
	if codeIn != 1 || codeFile != 1 || errIn != errFile || !strings.Contains(errIn, "tls.cert_file") {
		t.Errorf("relative cert elsewhere: stdin exit %d %q, file exit %d %q", codeIn, errIn, codeFile, errFile)
	}
	codeIn, _, errIn = validate(dir, bad, true)
	codeFile, _, errFile = validate(dir, bad, false)
	if codeIn != 1 || errIn != errFile || strings.Count(errIn, "\n") != 2 {
		t.Errorf("bad config: stdin exit %d %q, file exit %d %q", codeIn, errIn, codeFile, errFile)
	}
	var stderr bytes.Buffer
	if code := run([]string{"run", "-config", "-"}, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "validate only") {
		t.Errorf("run -config -: exit %d %q", code, stderr.String())
	}
}
