package openapi

import (
	"context"
	"sync"
	"time"
)

// This file fills a document's data routes with their columns, read by
// whoever knows them (the gateway hands a reader per data route: its
// route's database, or the configuration's column_types), then renders it.

const (
	// Deadline bounds a document's wait for the databases: past it, the
	// columns not read yet are unknown in this document.
	Deadline = 2 * time.Second
	// Readers caps the routes whose columns are read at once.
	Readers = 4
)

// Columns are a data route's answer columns as learnt for one document.
type Columns struct {
	// Known is true when Columns are the answer's, in order.
	Known   bool
	Columns []Column
	// Note says where they came from, or why they are unknown.
	Note string
}

// ColumnsReader reads one data route's columns within ctx.
type ColumnsReader func(ctx context.Context) Columns

// Build renders doc after reading the columns of each data route whose
// name has a reader (at most Readers at once, within Deadline): each
// filter gets its column's kind.
func Build(ctx context.Context, doc Document, readers map[string]ColumnsReader) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, Deadline)
	defer cancel()
	slots := make(chan struct{}, Readers)
	var wg sync.WaitGroup
	for i := range doc.Routes {
		d, read := doc.Routes[i].Data, readers[doc.Routes[i].Name]
		if d == nil || read == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-ctx.Done():
				d.ColumnsNote = "the document's deadline passed before the data source was asked"
				return
			}
			d.apply(read(ctx))
		}()
	}
	wg.Wait()
	return Render(doc)
}

// apply puts the columns learnt into d (filters get their column's kind).
func (d *Data) apply(c Columns) {
	d.ColumnsKnown, d.Columns, d.ColumnsNote = c.Known, c.Columns, c.Note
	for i := range d.Filters {
		for _, col := range c.Columns {
			if col.Name == d.Filters[i].Column {
				d.Filters[i].Kind = col.Kind
			}
		}
	}
}
