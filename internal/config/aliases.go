package config

import (
	"github.com/levee-gw/levee/internal/config/engine"
)

// FieldError is one problem in a configuration: the path of the field it
// concerns and what is wrong with it (engine.FieldError, which documents
// its form).
type FieldError = engine.FieldError

// Errors is every problem found in one configuration, in file order
// (engine.Errors). Parse and Load return it as *Errors, never empty.
type Errors = engine.Errors
