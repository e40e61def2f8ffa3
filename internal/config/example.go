package config

import _ "embed" // ExampleYAML

// ExampleYAML is a complete, commented, valid configuration that sets
// every field (most to its default) and explains it: example.yaml,
// embedded. The documentation embeds it (TestConfigurationDocEmbedsExample)
// and tests parse it (TestExampleYAML, TestParseValidGolden against
// testdata/example.json), so it cannot drift from the parser.
//
//go:embed example.yaml
var ExampleYAML string
