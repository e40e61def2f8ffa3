package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/levee-gw/levee/internal/config/engine"
)

// CLIDefaults are the defaults of the admin CLI's (levee apps, levee
// data-apis) -admin and -token-file flags, read from the CLI's own file
// (CLIFilePath), not from levee's configuration.
type CLIDefaults struct {
	// Admin is the admin API's URL ("" when the file does not set it).
	Admin string
	// TokenFile is the admin token's file, resolved against the CLI
	// file's directory when relative, "~/" against the home directory
	// ("" when not set).
	TokenFile string
}

// maxCLIFileBytes bounds the CLI file read: it holds two short keys.
const maxCLIFileBytes = 64 << 10

// CLIFilePath returns where the CLI file is: $XDG_CONFIG_HOME/levee/cli.yaml,
// else ~/.config/levee/cli.yaml ("" when neither can be known).
func CLIFilePath() string {
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "levee", "cli.yaml")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, ".config", "levee", "cli.yaml")
}

// ReadCLIFile reads the CLI file at path:
//
//	admin: http://127.0.0.1:9901     # the admin API's URL
//	token_file: ~/.config/levee/token # a file holding the admin token
//
// A file that does not exist is no error (zero CLIDefaults); any other
// problem (unreadable, over 64 KiB, a YAML error, an unknown key, a value
// not a string) is an *Errors placed in the file as levee's configuration's
// are (FieldError.Located).
func ReadCLIFile(path string) (CLIDefaults, error) {
	var d CLIDefaults
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return d, engine.FileError(fmt.Sprintf("reading the CLI file: %v", err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCLIFileBytes+1))
	if err != nil {
		return d, engine.FileError(fmt.Sprintf("reading the CLI file: %v", err))
	}
	if len(data) > maxCLIFileBytes {
		return d, engine.FileError(fmt.Sprintf("file is larger than the %s limit", engine.FormatSize(maxCLIFileBytes)))
	}
	root, errs := engine.Decode(data)
	if errs != nil {
		return d, errs
	}
	p := &engine.Parser{}
	if !p.Scan(root, "", 0) {
		return d, p.Result()
	}
	set, ok := p.Fields("", root, "admin", "token_file")
	if ok {
		if n := set["admin"]; n != nil {
			if s, ok := p.Str("admin", n); ok {
				if s == "" {
					p.Add(n, "admin", "must not be empty (omit it for the default)")
				}
				d.Admin = s
			}
		}
		if n := set["token_file"]; n != nil {
			if s, ok := p.Str("token_file", n); ok {
				if s == "" {
					p.Add(n, "token_file", "must not be empty (omit it)")
				}
				d.TokenFile = resolveCLIPath(path, s)
			}
		}
	}
	if errs := p.Result(); errs != nil {
		return CLIDefaults{}, errs
	}
	return d, nil
}

// resolveCLIPath resolves p, a path the CLI file at file names: "~/x"
// under the home directory, a relative one against the file's directory.
func resolveCLIPath(file, p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(file), p)
}
