package config

import (
	"encoding/json"
	"fmt"

	"github.com/levee-gw/levee/internal/config/engine"
)

// deploy/levee.schema.json is JSONSchema's output; TestSchemaFresh fails
// when it is stale, and this rewrites it.
//go:generate go test -run ^TestSchemaFresh$ -update .

// SchemaID is the $id of the generated schema.
const SchemaID = "https://github.com/levee-gw/levee/deploy/levee.schema.json"

// tokenPattern matches an HTTP token (validToken), such as a method.
const tokenPattern = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"

// namePattern matches a valid upstream name (validName).
var namePattern = fmt.Sprintf(`^[a-z0-9_.-]{1,%d}$`, maxNameLen)

// JSONSchema returns a JSON Schema (draft 2020-12) of the config file,
// generated from the field tables (one per block; engine.Schema), indented and ending in a
// newline. Editors use it to complete and check a file as it is written.
// It states each field's kind, bounds, allowed values and default, and
// refuses unknown keys of every described block; it is looser than Parse
// (cross-field rules, addresses, hash_on forms and duplicates are
// Parse's alone), so `levee validate` stays the authority: a file
// Parse accepts always validates against it, not the other way round.
func JSONSchema() []byte {
	s := engine.Schema(rootBlock, namePattern)
	s["type"] = "object"
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["$id"] = SchemaID
	s["title"] = "levee configuration"
	s["description"] = "The levee config file (docs/configuration.md). Generated from the field tables of internal/config by `go generate ./internal/config`; do not edit."
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic("config: cannot marshal the schema: " + err.Error()) // only maps, slices, strings and numbers
	}
	return append(b, '\n')
}
