package config

import "github.com/levee-gw/levee/internal/config/engine"

// docs/configuration.md's "Field reference" section is FieldReference's
// output between the two markers below; TestFieldReferenceFresh fails when
// it is stale, and this rewrites it.
//go:generate go test -run ^TestFieldReferenceFresh$ -update .

// The markers around the generated field reference in
// docs/configuration.md.
const (
	FieldReferenceBegin = "<!-- BEGIN FIELD REFERENCE: generated from internal/config's field tables by `go generate ./internal/config`; do not edit -->"
	FieldReferenceEnd   = "<!-- END FIELD REFERENCE -->"
)

// FieldReference returns docs/configuration.md's field reference: one
// Markdown table row per field of the file (path, kind and bounds,
// default, what a reload does with a change, and the table's doc line,
// the field's one description), between the two markers.
func FieldReference() []byte {
	return engine.Reference(rootBlock, FieldReferenceBegin, FieldReferenceEnd)
}
