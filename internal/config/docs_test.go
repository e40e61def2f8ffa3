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
