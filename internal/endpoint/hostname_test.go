package endpoint

import (
	"strings"
	"testing"
)

func TestValidDNSName(t *testing.T) {
	for s, want := range map[string]bool{
		"api.example.com": true, "a": true, "video-3.internal": true, "xn--bcher-kva.example": true,
		"": false, "a..b": false, "-a.example": false, "a-.example": false, "10.0.0.256": false,
		"under_score.example": false, "api.example.com.": false, "é.example": false,
		strings.Repeat("a", 64) + ".example": false, strings.Repeat("a.", 127) + "a": false,
		strings.Repeat("a", 63) + ".example": true, "1a.example": true, "example.123": false,
	} {
		if got := ValidDNSName(s); got != want {
			t.Errorf("ValidDNSName(%q) = %v, want %v", s, got, want)
		}
	}
}
