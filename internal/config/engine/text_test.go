package engine

import "testing"

// Moved from internal/config's config_test.go with the function it tests.
func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"conect", "connect", 1}, {"lsiten", "listen", 2}, {"abc", "", 3}, {"kitten", "sitting", 3}} {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestSuggest: a misspelt name within two edits gets the nearest known
// one, the earlier of two equally near; anything farther gets nothing.
func TestSuggest(t *testing.T) {
	for _, tt := range []struct {
		k     string
		known []string
		want  string
	}{
		{"lsiten", []string{"listen", "admin"}, ` (did you mean "listen"?)`},
		{"admn", []string{"admin", "adman"}, ` (did you mean "admin"?)`},
		{"zzzzzz", []string{"listen"}, ""},
	} {
		if got := Suggest(tt.k, tt.known); got != tt.want {
			t.Errorf("Suggest(%q, %q) = %q, want %q", tt.k, tt.known, got, tt.want)
		}
	}
}
