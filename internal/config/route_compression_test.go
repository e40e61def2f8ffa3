package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestParseCompression: omitted fields take their defaults; given ones
// are stored normalised (media types lower case); a route without the
// block compresses nothing.
func TestParseCompression(t *testing.T) {
	cfg, err := Parse([]byte(head + upstreams + `routes:
  - {name: a, match: {path_prefix: /a}, upstream: video, compression: {}}
  - name: b
    match: {path_prefix: /b}
    upstream: video
    compression: {types: [Application/JSON, "text/*", image/svg+xml], min_bytes: 4KiB, level: best, encodings: [gzip, br]}
  - {name: c, match: {path_prefix: /c}, upstream: video}
`))
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := cfg.Routes[0].Compression, cfg.Routes[1].Compression, cfg.Routes[2].Compression
	want := &Compression{Types: DefaultCompressionTypes(), MinBytes: 1024, Level: "fast", Encodings: DefaultCompressionEncodings()}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("defaults: %+v, want %+v", a, want)
	}
	want = &Compression{Types: []string{"application/json", "text/*", "image/svg+xml"}, MinBytes: 4096, Level: "best", Encodings: []string{"gzip", "br"}}
	if !reflect.DeepEqual(b, want) {
		t.Errorf("given: %+v, want %+v", b, want)
	}
	if c != nil {
		t.Errorf("omitted: %+v, want nil", c)
	}
}

// TestParseRejectsCompression: each bad value named by its path.
func TestParseRejectsCompression(t *testing.T) {
	for _, tt := range []struct {
		name, block string
		want        []string
	}{
		{"bad types", `{types: [json, "*/*", "text/*;q=1", "application/json", "APPLICATION/JSON", 3]}`, []string{
			`routes[0].compression.types[0]: must be a media type "type/subtype" or "type/*" without parameters, such as "application/json" or "text/*", got "json"`,
			`routes[0].compression.types[1]: must be a media type "type/subtype" or "type/*" without parameters, such as "application/json" or "text/*", got "*/*"`,
			`routes[0].compression.types[2]: must be a media type "type/subtype" or "type/*" without parameters, such as "application/json" or "text/*", got "text/*;q=1"`,
			`routes[0].compression.types[4]: duplicate media type "application/json" (first at types[3])`,
			`routes[0].compression.types[5]: must be a string, got 3`,
		}},
		{"empty types", `{types: []}`, []string{
			`routes[0].compression.types: must list at least one media type (omit compression to compress nothing)`,
		}},
		{"bad encodings", `{encodings: [gzip, deflate, gzip]}`, []string{
			`routes[0].compression.encodings[1]: must be one of "zstd", "br", "gzip", got "deflate"`,
			`routes[0].compression.encodings[2]: duplicate encoding "gzip" (first at encodings[0])`,
		}},
		{"empty encodings", `{encodings: []}`, []string{
			`routes[0].compression.encodings: must list 1 to 3 of "zstd", "br", "gzip", got 0`,
		}},
		{"bad level and size", `{level: max, min_bytes: -1, window: 9}`, []string{
			`routes[0].compression.level: must be one of "fast", "default", "best", got "max"`,
			`routes[0].compression.min_bytes: must be a size such as 65536 or "64KiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got -1`,
			`routes[0].compression.window: unknown field`,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(head + upstreams + "routes:\n  - {name: a, upstream: video, compression: " + tt.block + "}\n"))
			if err == nil || cfg != nil {
				t.Fatalf("Parse succeeded, want errors:\n%s", strings.Join(tt.want, "\n"))
			}
			got := errorLines(t, err)
			if !slices.Equal(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
