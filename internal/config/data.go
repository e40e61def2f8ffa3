package config

import (
	"math"

	"github.com/levee-gw/levee/internal/config/engine"
	"github.com/levee-gw/levee/internal/dataformat"
	"github.com/levee-gw/levee/internal/valuekind"
)

// The vocabulary shared by the data APIs' blocks (data_sources.go,
// data_routes.go, data_query.go): answer formats, the value kinds of
// parameters and columns, and their bounds.

// The answer formats of data routes.
var dataFormats = dataformat.FormatNames()

// dataParamTypes are the types a SQL-mode parameter may have, and
// dataColumnKinds the kinds a route's column_types may declare: both from
// the one value-kind table (package valuekind).
var (
	dataParamTypes  = valuekind.ParamNames()
	dataColumnKinds = valuekind.Names()
)

// dataScalarForms are the forms of a parameter's default, min and max:
// written as the file pleases, parsed by the parameter's type.
var dataScalarForms = []engine.Field{{Kind: engine.KindString}, {Kind: engine.KindNumber, Flo: -math.MaxFloat64, Fhi: math.MaxFloat64}, {Kind: engine.KindBool}}

// dataIdentPattern is the schema's rule for a parameter name (what
// dataquery accepts after a colon).
const dataIdentPattern = `^[A-Za-z_][A-Za-z0-9_]{0,62}$`

// Bounds of data sources and data routes.
const (
	maxDataConns = 1000
	maxDataRows  = 10_000_000
	maxDataBytes = 1 << 30
	// maxDSNBytes bounds a dsn_file: one line.
	maxDSNBytes = 4096
)
