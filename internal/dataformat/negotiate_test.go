package dataformat

import (
	"strings"
	"testing"
)

func TestNegotiate(t *testing.T) {
	all := []Format{JSON, NDJSON, CSV}
	csvFirst := []Format{CSV, JSON}
	cases := []struct {
		name    string
		accept  string
		allowed []Format
		want    Format // 0: not acceptable (406)
	}{
		{"absent", "", all, JSON},
		{"absent, route order", "", csvFirst, CSV},
		{"only spaces", " \t ", all, JSON},
		{"exact json", "application/json", all, JSON},
		{"exact ndjson", "application/x-ndjson", all, NDJSON},
		{"ndjson alias", "application/ndjson", all, NDJSON},
		{"exact csv", "text/csv", all, CSV},
		{"case-insensitive", "TEXT/CSV", all, CSV},
		{"not allowed", "text/csv", []Format{JSON, NDJSON}, 0},
		{"unknown type", "text/html", all, 0},
		{"star star", "*/*", all, JSON},
		{"star star, route order", "*/*", csvFirst, CSV},
		{"bare star (legacy)", "*", all, JSON},
		{"application star", "application/*", []Format{CSV, NDJSON, JSON}, NDJSON},
		{"text star", "text/*", all, CSV},
		{"q picks", "application/json;q=0.5, text/csv", all, CSV},
		{"q picks despite order", "text/csv;q=0.9, application/x-ndjson", all, NDJSON},
		{"tie: route order, not header order", "text/csv, application/json", all, JSON},
		{"tie at q<1", "text/csv;q=0.5, application/x-ndjson;q=0.5", all, NDJSON},
		{"q=0 excludes", "application/json;q=0", all, 0},
		{"q=0 specific beats wildcard", "*/*, application/json;q=0", all, NDJSON},
		{"q=0 wildcard, specific allowed", "*/*;q=0, text/csv", all, CSV},
		{"type wildcard beats star", "*/*;q=0.1, application/*;q=0.8, text/csv;q=0.5", all, JSON},
		{"specific beats type wildcard", "application/*;q=0.9, application/json;q=0.2", all, NDJSON},
		{"params more specific", "text/csv;q=0.1, text/csv;charset=utf-8;q=0.9, application/json;q=0.5", all, CSV},
		{"charset utf-8", "text/csv; charset=UTF-8", all, CSV},
		{"charset other", "text/csv; charset=iso-8859-1", all, 0},
		{"charset other, fallback", "text/csv; charset=iso-8859-1, */*;q=0.1", all, JSON},
		{"quoted param with comma", `text/csv;foo="a,b;c", application/json;q=0.1`, all, CSV},
		{"browser", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8", all, JSON},
		{"java default", "text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2", csvFirst, CSV},
		{"q=1.000", "text/csv;q=1.000", all, CSV},
		{"q=0.001", "text/csv;q=0.001", all, CSV},
		{"OWS around semicolons", "text/csv ; q=0.5 , application/json ;q=0.4", all, CSV},
		{"empty elements", ",, text/csv ,,", all, CSV},
		{"accept-ext after q ignored", "text/csv;q=0.5;level=1, application/json;q=0.4", all, CSV},
		{"duplicate ranges take the higher q", "text/csv;q=0.1, application/json;q=0.5, text/csv;q=0.9", all, CSV},
		// Malformed ranges are skipped; the well-formed ones still count.
		{"bad q skipped", "text/csv;q=2, application/json", all, JSON},
		{"q=1.5 skipped", "text/csv;q=1.5, application/x-ndjson;q=0.1", all, NDJSON},
		{"q with 4 decimals skipped", "text/csv;q=0.1234, application/x-ndjson;q=0.1", all, NDJSON},
		{"q twice skipped", "text/csv;q=0.5;q=0.6, application/x-ndjson;q=0.1", all, NDJSON},
		{"spaces around = skipped", "text/csv; q = 0.5, application/x-ndjson;q=0.1", all, NDJSON},
		{"no subtype skipped", "text, application/json", all, JSON},
		{"star/csv skipped", "*/csv, application/json", all, JSON},
		{"unterminated quote skipped", `text/csv;a="b, application/json`, all, 0},
		// A header with no well-formed range at all is refused.
		{"garbage", "garbage", all, 0},
		{"only bad q", "text/csv;q=x", all, 0},
		{"non-token bytes", "tëxt/csv", all, 0},
		{"control byte", "text/csv\x00", all, 0},
		{"nothing allowed", "*/*", nil, 0},
		{"invalid allowed skipped", "*/*", []Format{0, 9, CSV}, CSV},
	}
	for _, c := range cases {
		got, ok := Negotiate(c.accept, c.allowed)
		if ok != (c.want != 0) || got != c.want {
			t.Errorf("%s: Negotiate(%q, %v) = %v, %v; want %v", c.name, c.accept, c.allowed, got, ok, c.want)
		}
	}
}

// TestNegotiateBounds: a header over MaxAcceptLen is refused whole; only
// the first MaxMediaRanges ranges count.
func TestNegotiateBounds(t *testing.T) {
	all := []Format{JSON, NDJSON, CSV}
	long := "text/csv," + strings.Repeat(" ", MaxAcceptLen)
	if f, ok := Negotiate(long, all); ok {
		t.Errorf("a %d-byte header gave %v", len(long), f)
	}
	atLimit := "text/csv" + strings.Repeat(" ", MaxAcceptLen-len("text/csv"))
	if f, ok := Negotiate(atLimit, all); !ok || f != CSV {
		t.Errorf("a header of exactly MaxAcceptLen: %v %v", f, ok)
	}
	filler := strings.Repeat("image/png,", MaxMediaRanges-1)
	if f, ok := Negotiate(filler+"text/csv", all); !ok || f != CSV {
		t.Errorf("range %d: %v %v", MaxMediaRanges, f, ok)
	}
	if f, ok := Negotiate(filler+"image/gif,text/csv", all); ok {
		t.Errorf("range %d counted: %v", MaxMediaRanges+1, f)
	}
}

func TestFormatNames(t *testing.T) {
	for _, f := range Formats {
		g, err := ParseFormat(f.String())
		if err != nil || g != f {
			t.Errorf("ParseFormat(%q) = %v, %v", f.String(), g, err)
		}
		if n, ok := Negotiate(f.MediaType(), Formats); !ok || n != f {
			t.Errorf("Negotiate(%q) = %v", f.MediaType(), n)
		}
		if n, ok := Negotiate(f.ContentType(), Formats); !ok || n != f {
			t.Errorf("Negotiate(%q) = %v", f.ContentType(), n)
		}
	}
	if _, err := ParseFormat("JSON"); err == nil {
		t.Error("ParseFormat is case-insensitive")
	}
	if Format(0).Valid() || Format(0).ContentType() != "" || Format(4).String() != "Format(4)" {
		t.Error("zero or unknown format treated as valid")
	}
}

// TestNegotiateAllocatesNothing: a common header costs no allocation.
func TestNegotiateAllocatesNothing(t *testing.T) {
	h := "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8, text/csv;charset=utf-8;q=0.85"
	avg := testing.AllocsPerRun(100, func() {
		if f, ok := Negotiate(h, Formats); !ok || f != CSV {
			t.Fatalf("%v %v", f, ok)
		}
	})
	if avg != 0 {
		t.Errorf("%.1f allocations", avg)
	}
}

func BenchmarkNegotiate(b *testing.B) {
	h := "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8"
	for b.Loop() {
		Negotiate(h, Formats)
	}
}
