package config

import (
	"os"
	"strings"
	"testing"
)

// TestConfigurationDocEmbedsExample keeps docs/configuration.md true: it
// must contain ExampleYAML verbatim (and ExampleYAML must parse, which
// TestExampleYAML checks).
func TestConfigurationDocEmbedsExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), ExampleYAML) {
		t.Fatal("docs/configuration.md no longer contains config.ExampleYAML verbatim; paste the new example into it")
	}
}

// TestFieldReferenceFresh keeps docs/configuration.md's field reference
// the field tables' output (FieldReference, between its markers); with
// -update (go generate ./internal/config) it rewrites that section.
func TestFieldReferenceFresh(t *testing.T) {
	const name = "../../docs/configuration.md"
	doc, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	begin := strings.Index(string(doc), FieldReferenceBegin)
	end := strings.Index(string(doc), FieldReferenceEnd)
	if begin < 0 || end < begin {
		t.Fatalf("docs/configuration.md has no field reference between %q and %q", FieldReferenceBegin, FieldReferenceEnd)
	}
	end += len(FieldReferenceEnd) + 1 // the marker's line ending
	want := FieldReference()
	if string(doc[begin:end]) == string(want) {
		return
	}
	if !*update {
		t.Fatal("docs/configuration.md's field reference is stale; run go generate ./internal/config")
	}
	out := append(append(append([]byte(nil), doc[:begin]...), want...), doc[end:]...)
	if err := os.WriteFile(name, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
