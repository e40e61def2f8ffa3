package config

import (
	"time"

	"github.com/levee-gw/levee/internal/dataquery"
)

// The data APIs' blocks of the field description (see fields.go, whose
// rules they follow): data_sources entries and a route's data block.
var (
	dataSourceBlock = newBlock(
		field{name: "driver", kind: kindEnum, enum: dataDrivers, required: true, doc: "the database: postgres or sqlite",
			bind: at(func(d *DataSource) *string { return &d.Driver })},
		field{name: "dsn", kind: kindString, nonEmpty: true, doc: "postgres: a libpq URL or key=value DSN (or dsn_file)", secret: true,
			bind: at(func(d *DataSource) *string { return &d.DSN })},
		field{name: "dsn_file", kind: kindString, nonEmpty: true, doc: "postgres: a file whose first line is the DSN",
			check: checkReadable, bind: at(func(d *DataSource) *string { return &d.DSNFile }), notSecret: "a path; the DSN it holds shows as dsn, redacted"},
		field{name: "path", kind: kindString, nonEmpty: true, doc: "sqlite: the database file, opened read-only",
			check: checkReadable, bind: at(func(d *DataSource) *string { return &d.Path })},
		field{name: "max_conns", kind: kindInt, lo: 1, hi: maxDataConns, def: DefaultDataMaxConns, doc: "hard cap on connections to the source",
			bind: at(func(d *DataSource) *int { return &d.MaxConns })},
		field{name: "statement_timeout", kind: kindDuration, def: DefaultDataStatementTimeout, doc: "each statement's timeout, enforced in the database",
			bind: at(func(d *DataSource) *time.Duration { return &d.StatementTimeout })},
		field{name: "connect_timeout", kind: kindDuration, def: DefaultDataConnectTimeout, doc: "opening one connection; past it: 503 data_source_unavailable",
			bind: at(func(d *DataSource) *time.Duration { return &d.ConnectTimeout })},
		field{name: "limits", kind: kindBlock, sub: limitsBlock, doc: "admission in front of the pool; adaptive up to max_conns when omitted; queue_timeout defaults to 500ms here"},
	)

	dataParamBlock = newBlock(
		field{name: "type", kind: kindEnum, enum: dataParamTypes, required: true, doc: "the parameter's type",
			bind: at(func(d *DataParam) *string { return &d.Type })},
		field{name: "list", kind: kindBool, def: false, doc: "a comma-separated list of the type (written IN (:name))",
			bind: at(func(d *DataParam) *bool { return &d.List })},
		field{name: "required", kind: kindBool, def: false, doc: "the request must give it",
			bind: at(func(d *DataParam) *bool { return &d.Required })},
		field{name: "default", kind: kindEither, either: dataScalarForms, doc: "the value when the request gives none; NULL when omitted"},
		field{name: "min", kind: kindEither, either: dataScalarForms, doc: "lowest value (numbers, dates, timestamps)"},
		field{name: "max", kind: kindEither, either: dataScalarForms, doc: "highest value (numbers, dates, timestamps)"},
		field{name: "max_len", kind: kindInt, lo: 1, hi: dataquery.MaxMaxLen, doc: "longest string, in bytes; 1024 when omitted",
			bind: at(func(d *DataParam) *int { return &d.MaxLen })},
		field{name: "max_items", kind: kindInt, lo: 1, hi: dataquery.MaxMaxItems, doc: "most items of a list; 100 when omitted",
			bind: at(func(d *DataParam) *int { return &d.MaxItems })},
	)

	dataPageBlock = newBlock(
		field{name: "keyset", kind: kindList, minItems: 1, maxItems: dataquery.MaxKeyset, item: &field{kind: kindString},
			doc: "columns that order the rows and make each row's place unique", required: true, notSecret: "column names"},
		field{name: "default", kind: kindInt, lo: 1, hi: dataquery.MaxPageSize, def: DefaultDataPageSize, doc: "page size without limit=",
			bind: at(func(d *DataPage) *int { return &d.Default })},
		field{name: "max", kind: kindInt, lo: 1, hi: dataquery.MaxPageSize, def: DefaultDataPageMax, doc: "largest limit= accepted",
			bind: at(func(d *DataPage) *int { return &d.Max })},
	)

	dataLimitsBlock = newBlock(
		field{name: "max_rows", kind: kindInt, lo: 1, hi: maxDataRows, def: DefaultDataMaxRows, doc: "most rows in one answer",
			bind: at(func(d *RouteData) *int { return &d.MaxRows })},
		field{name: "max_bytes", kind: kindSize, lo: 1, hi: maxDataBytes, def: int64(DefaultDataMaxBytes), doc: "most bytes of rows in one answer",
			bind: at(func(d *RouteData) *int64 { return &d.MaxBytes })},
	)

	dataCacheBlock = newBlock(
		field{name: "ttl", kind: kindDuration, required: true, doc: "how long an answer is served from the cache",
			bind: at(func(d *DataCache) *time.Duration { return &d.TTL })},
		field{name: "stale_if_error", kind: kindDuration, doc: "how long past ttl an answer is served while the source fails; never when omitted",
			bind: at(func(d *DataCache) *time.Duration { return &d.StaleIfError })},
	)

	dataBlock = newBlock(
		field{name: "source", kind: kindString, required: true, pattern: namePattern, doc: "the data source",
			bind: at(func(d *RouteData) *string { return &d.Source })},
		field{name: "sql", kind: kindString, nonEmpty: true, doc: "SQL mode: one SELECT with :name parameters",
			bind: at(func(d *RouteData) *string { return &d.SQL })},
		field{name: "params", kind: kindMap, sub: dataParamBlock, pattern: dataIdentPattern, maxItems: dataquery.MaxParams, doc: "SQL mode: the parameters by name"},
		field{name: "table", kind: kindString, nonEmpty: true, doc: "table mode: the table or view (schema.table allowed)",
			bind: at(func(d *RouteData) *string { return &d.Table })},
		field{name: "columns", kind: kindList, minItems: 1, maxItems: dataquery.MaxColumns, item: &field{kind: kindString}, doc: "table mode: the columns answered"},
		field{name: "filters", kind: kindMap, pattern: "^.+$", item: &field{kind: kindList, minItems: 1, item: &field{kind: kindEnum, enum: dataOps}},
			doc: "table mode: per column, the operators a request may filter it with"},
		field{name: "order", kind: kindList, minItems: 1, maxItems: dataquery.MaxColumns, item: &field{kind: kindString}, doc: `table mode: the order, each column optionally followed by " desc"`},
		field{name: "column_types", kind: kindMap, pattern: "^.+$", maxItems: dataquery.MaxColumns, item: &field{kind: kindEnum, enum: dataColumnKinds},
			doc: "the answer's columns and their kinds, shown in the OpenAPI document instead of asking the database"},
		field{name: "page", kind: kindBlock, sub: dataPageBlock, doc: "keyset pages of JSON answers; not paged when omitted"},
		field{name: "limits", kind: kindBlock, sub: dataLimitsBlock, doc: "caps of every answer",
			bind: at(func(d *RouteData) *RouteData { return d })},
		field{name: "formats", kind: kindList, minItems: 1, maxItems: len(dataFormats), item: &field{kind: kindEnum, enum: dataFormats},
			doc: "answer formats by Accept, the first the default; all three when omitted"},
		field{name: "cache", kind: kindBlock, sub: dataCacheBlock, doc: "answer cache; none when omitted",
			bind: opt(func(d *RouteData) **DataCache { return &d.Cache }, func() *DataCache { return &DataCache{} })},
		field{name: "statement_timeout", kind: kindDuration, doc: "this route's statement timeout; the source's when omitted",
			bind: at(func(d *RouteData) *time.Duration { return &d.StatementTimeout })},
		field{name: "send_timeout", kind: kindDuration, def: DefaultDataSendTimeout, doc: "bound on each write of the answer to the client",
			bind: at(func(d *RouteData) *time.Duration { return &d.SendTimeout })},
	)
)
