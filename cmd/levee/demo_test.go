package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/testkit"
)

// lockedBuffer is a bytes.Buffer safe for the child process's copier and
// the test to use at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// demoTry is one request a demo line makes, and the statuses it promises.
type demoTry struct {
	line    string
	method  string
	url     string
	header  http.Header
	body    []byte
	repeat  int    // times the line sends it (a for loop), at least 1
	first   []int  // statuses the (each) answer may have
	then    int    // with "A, then B": a later answer must be B (0: none)
	comment string // the promise, for messages
}

// promise reads the status a demo comment starts with: "NNN", "NNN or
// MMM", or "NNN, then MMM" (demo.Intro documents the form).
var promise = regexp.MustCompile(`^(\d{3})(?: or (\d{3}))?(?:, then (\d{3}))?\b`)

// parseDemoLine turns a printed demo line into the request it makes. It
// knows the shell forms the demo uses ("for V in W...; do CMD; done", a
// pipeline from "head -c N /dev/zero" into curl and out to grep) and curl's
// flags -s, -i, -S, -X, -H and --data-binary; anything else is an error,
// so a new line cannot be skipped silently.
func parseDemoLine(line string) (*demoTry, error) {
	cmd, comment, ok := strings.Cut(line, " # ")
	if !ok {
		return nil, fmt.Errorf("no comment with the promised status")
	}
	try := &demoTry{line: line, header: http.Header{}, repeat: 1, comment: strings.TrimSpace(comment)}
	m := promise.FindStringSubmatch(try.comment)
	if m == nil {
		return nil, fmt.Errorf("comment %q does not start with a status", try.comment)
	}
	for _, s := range m[1:3] {
		if s != "" {
			n, _ := strconv.Atoi(s)
			try.first = append(try.first, n)
		}
	}
	if m[3] != "" {
		try.then, _ = strconv.Atoi(m[3])
	}
	words, err := shellWords(cmd)
	if err != nil {
		return nil, err
	}
	// for V in W1 W2 ...; do BODY; done
	if len(words) > 0 && words[0] == "for" {
		do := indexOf(words, "do")
		done := indexOf(words, "done")
		if len(words) < 4 || words[2] != "in" || do < 0 || done < do || words[do-1] != ";" || words[done-1] != ";" {
			return nil, fmt.Errorf("unsupported for loop")
		}
		try.repeat = do - 4 // the words between "in" and ";"
		words = words[do+1 : done-1]
	}
	var stdin []byte
	sawCurl := false
	for _, seg := range splitPipeline(words) {
		switch {
		case len(seg) == 0:
			return nil, fmt.Errorf("empty pipeline segment")
		case seg[0] == "head":
			if len(seg) != 4 || seg[1] != "-c" || seg[3] != "/dev/zero" {
				return nil, fmt.Errorf("unsupported head %q", seg)
			}
			n, err := strconv.Atoi(seg[2])
			if err != nil {
				return nil, err
			}
			stdin = make([]byte, n)
		case seg[0] == "curl":
			if sawCurl {
				return nil, fmt.Errorf("two curl commands")
			}
			sawCurl = true
			if err := try.curl(seg[1:], stdin); err != nil {
				return nil, err
			}
		case seg[0] == "grep":
			// Filters what is shown; the status is what is checked.
		default:
			return nil, fmt.Errorf("unsupported command %q", seg[0])
		}
	}
	if !sawCurl {
		return nil, fmt.Errorf("no curl command")
	}
	return try, nil
}

// curl reads curl's arguments into try.
func (try *demoTry) curl(args []string, stdin []byte) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-s" || a == "-i" || a == "-si" || a == "-S":
		case a == "-X" && i+1 < len(args):
			i++
			try.method = args[i]
		case a == "-H" && i+1 < len(args):
			i++
			k, v, ok := strings.Cut(args[i], ":")
			if !ok {
				return fmt.Errorf("bad header %q", args[i])
			}
			try.header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		case a == "--data-binary" && i+1 < len(args):
			i++
			if args[i] == "@-" {
				try.body = stdin
			} else {
				try.body = []byte(args[i])
			}
			if try.body == nil {
				try.body = []byte{}
			}
		case strings.HasPrefix(a, "-"):
			return fmt.Errorf("unsupported curl flag %q", a)
		default:
			if try.url != "" {
				return fmt.Errorf("two URLs")
			}
			u, err := url.Parse(a)
			if err != nil || u.Scheme != "http" || u.Host == "" {
				return fmt.Errorf("bad URL %q", a)
			}
			try.url = a
		}
	}
	if try.url == "" {
		return fmt.Errorf("curl without a URL")
	}
	if try.method == "" {
		try.method = http.MethodGet
		if try.body != nil {
			try.method = http.MethodPost // as curl does with data
		}
	}
	if len(try.body) > 1024 {
		try.header.Set("Expect", "100-continue") // as curl does for a large body
	}
	return nil
}

// shellWords splits a command line into words and the operators | and ;,
// honouring single and double quotes. The one expansion is $(cat FILE),
// bare or in double quotes, which reads FILE as the shell would (the
// demo's admin token); no escapes, no other expansion.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			end := strings.IndexByte(s[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("unbalanced quote")
			}
			quoted := s[i+1 : i+1+end]
			if c == '"' {
				var err error
				if quoted, err = expandCat(quoted); err != nil {
					return nil, err
				}
			}
			cur.WriteString(quoted)
			inWord = true
			i += end + 1
		case strings.HasPrefix(s[i:], "$(cat "):
			end := strings.IndexByte(s[i:], ')')
			if end < 0 {
				return nil, fmt.Errorf("unbalanced $(")
			}
			x, err := expandCat(s[i : i+end+1])
			if err != nil {
				return nil, err
			}
			cur.WriteString(x)
			inWord = true
			i += end
		case c == ' ' || c == '\t':
			flush()
		case c == '|' || c == ';':
			flush()
			words = append(words, string(c))
		case c == '\\' || c == '$' || c == '`' || c == '&' || c == '>' || c == '<':
			return nil, fmt.Errorf("unsupported shell syntax %q", c)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words, nil
}

// expandCat replaces each $(cat FILE) in s with FILE's content, its
// trailing newline removed as the shell removes it; any other $ is an
// error.
func expandCat(s string) (string, error) {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			return b.String() + s, nil
		}
		rest, ok := strings.CutPrefix(s[i:], "$(cat ")
		end := strings.IndexByte(rest, ')')
		if !ok || end < 0 {
			return "", fmt.Errorf("unsupported shell syntax in %q", s)
		}
		content, err := os.ReadFile(strings.TrimSpace(rest[:end]))
		if err != nil {
			return "", err
		}
		b.WriteString(s[:i] + strings.TrimRight(string(content), "\n"))
		s = rest[end+1:]
	}
}

func splitPipeline(words []string) [][]string {
	var segs [][]string
	var cur []string
	for _, w := range words {
		if w == "|" {
			segs = append(segs, cur)
			cur = nil
			continue
		}
		cur = append(cur, w)
	}
	return append(segs, cur)
}

func indexOf(words []string, w string) int {
	for i, x := range words {
		if x == w {
			return i
		}
	}
	return -1
}

// TestDemoLinesDoWhatTheySay starts `levee demo` as a process on loopback
// ports, takes every curl line it prints, sends each line's request over
// a real socket and checks the status the line's comment promises.
func TestDemoLinesDoWhatTheySay(t *testing.T) {
	p := startProcess(t, "demo", "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0")
	var intro string
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		intro = p.stdout.String()
		return strings.Contains(intro, "Press Ctrl-C"), fmt.Sprintf("the demo printed no intro; stdout %q, stderr:\n%s", intro, p.log())
	})
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{ExpectContinueTimeout: 5 * time.Second}}
	defer client.CloseIdleConnections()
	tried := 0
	for _, line := range strings.Split(intro, "\n") {
		line = strings.TrimSpace(line)
		if !strings.Contains(line, "curl ") {
			continue
		}
		tried++
		try, err := parseDemoLine(line)
		if err != nil {
			t.Errorf("demo line %q: %v", line, err)
			continue
		}
		// "A, then B" repeats until B: bounded at 20 tries.
		sends := try.repeat
		if try.then != 0 {
			sends = 20
		}
		var statuses []int
		sawThen := false
		for i := range sends {
			status, err := send(client, try)
			if err != nil {
				t.Errorf("demo line %q: %v", line, err)
				break
			}
			statuses = append(statuses, status)
			if try.then != 0 && i > 0 && status == try.then {
				sawThen = true
				break
			}
			if !sliceHas(try.first, status) {
				t.Errorf("demo line %q answered %d (answers %v); it promises %q", line, status, statuses, try.comment)
				break
			}
		}
		if try.then != 0 && !sawThen {
			t.Errorf("demo line %q never answered %d in %d tries (answers %v); it promises %q", line, try.then, sends, statuses, try.comment)
		}
		t.Logf("%v  %s", statuses, line)
	}
	if tried < 10 {
		t.Fatalf("found %d curl lines in the demo's intro, want at least 10:\n%s", tried, intro)
	}
	// The web UI: a line names it, and a curl line (tried above) fetches it.
	if !regexp.MustCompile(`(?m)^  web UI +http://`+regexp.QuoteMeta(p.admin)+`/ui/ `).MatchString(intro) ||
		!regexp.MustCompile(`(?m)^  curl -s http://`+regexp.QuoteMeta(p.admin)+`/ui/ .*# 200`).MatchString(intro) {
		t.Errorf("the intro does not show and try the web UI at /ui/:\n%s", intro)
	}
	// The access log is off (no request line after all those requests).
	if strings.Contains(p.log()+p.stdout.String(), `"request_id":`) {
		t.Errorf("the demo logged requests without -access-log:\n%s\n%s", p.log(), p.stdout.String())
	}
	// SIGUSR2 prints the intro again, whole.
	if err := p.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		out := p.stdout.String()
		return strings.Count(out, "levee demo is running.") == 2 && strings.Count(out, "Press Ctrl-C") == 2, fmt.Sprintf("SIGUSR2 did not print the intro again; stdout:\n%s", out)
	})
	if again := p.stdout.String()[len(intro):]; !strings.HasSuffix(strings.TrimSpace(again), strings.TrimSpace(intro)) {
		t.Errorf("the intro SIGUSR2 printed differs from the first:\n%s", again)
	}
	// The state lives in a levee-demo-* directory of its own, which the
	// intro names (the admin token), removed when the demo stops.
	m := regexp.MustCompile(`admin token  (\S+)`).FindStringSubmatch(intro)
	if m == nil {
		t.Fatalf("the intro names no admin token file:\n%s", intro)
	}
	stateDir := filepath.Dir(m[1])
	if ok, _ := filepath.Match(filepath.Join(os.TempDir(), demoStatePattern), stateDir); !ok {
		t.Errorf("the demo's state is in %s, want a new %s under %s", stateDir, demoStatePattern, os.TempDir())
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("demo exited with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("demo did not stop")
	}
	if _, err := os.Stat(stateDir); !os.IsNotExist(err) {
		t.Errorf("the demo's state directory %s is still there after it stopped (%v)", stateDir, err)
	}
}

// send makes one request of try and returns the status, the body read to
// the end.
func send(client *http.Client, try *demoTry) (int, error) {
	var body io.Reader
	if try.body != nil {
		body = bytes.NewReader(try.body)
	}
	req, err := http.NewRequest(try.method, try.url, body)
	if err != nil {
		return 0, err
	}
	for k, v := range try.header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func sliceHas(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestParseDemoLine pins the parser on the shapes the demo prints, so the
// demo test cannot pass by misreading a line.
func TestParseDemoLine(t *testing.T) {
	try, err := parseDemoLine(`head -c 2000 /dev/zero | curl -s --data-binary @- http://h:1/upload/   # 413 body_too_large`)
	if err != nil || try.method != "POST" || len(try.body) != 2000 || try.url != "http://h:1/upload/" || try.first[0] != 413 || try.header.Get("Expect") != "100-continue" {
		t.Errorf("pipeline: %+v, %v", try, err)
	}
	try, err = parseDemoLine(`for i in 1 2 3; do curl -s http://h:1/ | grep -o 'fast-.'; done   # 200 each`)
	if err != nil || try.repeat != 3 || try.method != "GET" || try.url != "http://h:1/" {
		t.Errorf("for loop: %+v, %v", try, err)
	}
	try, err = parseDemoLine(`curl -si -H 'X-Api-Key: k k' 'http://h:1/keyed/?a=b' | grep -i ratelimit   # 200, then 429 rate_limited`)
	if err != nil || try.header.Get("X-Api-Key") != "k k" || try.url != "http://h:1/keyed/?a=b" || try.first[0] != 200 || try.then != 429 {
		t.Errorf("header and then: %+v, %v", try, err)
	}
	try, err = parseDemoLine(`curl -s http://h:1/flaky/   # 200 or 500: sometimes`)
	if err != nil || len(try.first) != 2 || try.first[1] != 500 {
		t.Errorf("or: %+v, %v", try, err)
	}
	tokFile := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(tokFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	try, err = parseDemoLine(`curl -s -X POST -H "Authorization: Bearer $(cat ` + tokFile + `)" http://h:1/api/v1/reload   # 200: with the token`)
	if err != nil || try.method != "POST" || try.header.Get("Authorization") != "Bearer s3cret" {
		t.Errorf("$(cat FILE): %+v, %v", try, err)
	}
	for _, bad := range []string{
		`curl -s -H "A: $(id)" http://h:1/   # 200`, // another expansion
		`curl -s http://h:1/`,                       // no promise
		`curl -s http://h:1/   # weighted 3:1`,      // no status
		`curl -k http://h:1/   # 200`,               // unknown flag
		`curl -s http://h:1/ > out   # 200`,         // redirection
		`wget http://h:1/   # 200`,                  // no curl
		`curl -s http://h:1/ http://h:2/   # 200`,   // two URLs
	} {
		if _, err := parseDemoLine(bad); err == nil {
			t.Errorf("parseDemoLine(%q) accepted it", bad)
		}
	}
}

// TestExampleAdminIsTheCLIDefault: a levee started from the example
// configuration listens for the admin API where `levee apps` and the demo
// look by default.
func TestExampleAdminIsTheCLIDefault(t *testing.T) {
	cfg, err := config.Parse([]byte(config.ExampleYAML))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Admin.Listen != defaultAdminAddr {
		t.Errorf("the example's admin.listen is %q, the CLI's default %q", cfg.Admin.Listen, defaultAdminAddr)
	}
}
