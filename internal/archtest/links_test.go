package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// markdownLink matches the target of an inline Markdown link: [text](target).
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// outsidePath matches a path that climbs out of the repository: "../"
// at the start of a word or code span.
var outsidePath = regexp.MustCompile("(^|[\\s`(\"'])\\.\\./")

// TestDocLinksStayInRepo: every relative link in README.md, docs/ and
// docs/notes/ names a file or directory of the repository, and the README,
// the page a newcomer starts from, names no path outside it
// ("../shared/..."): a reader of the repository alone must be able to
// follow every one. (Pages under docs/ may say how figures were measured
// with the shared bench that lives beside the repository; they do not link
// to it.)
func TestDocLinksStayInRepo(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	notes, err := filepath.Glob(filepath.Join(root, "docs", "notes", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, notes...)
	pages = append(pages, filepath.Join(root, "README.md"))
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				resolved := filepath.Clean(filepath.Join(filepath.Dir(page), target))
				if !strings.HasPrefix(resolved, root+string(filepath.Separator)) {
					t.Errorf("%s:%d: link %q leaves the repository", rel, i+1, m[1])
					continue
				}
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s:%d: link %q names nothing in the repository", rel, i+1, m[1])
				}
			}
			if rel == "README.md" && outsidePath.MatchString(line) {
				t.Errorf("%s:%d: points outside the repository: %s", rel, i+1, strings.TrimSpace(line))
			}
		}
	}
}
