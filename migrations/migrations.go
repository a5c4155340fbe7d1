// Package migrations embeds the goose SQL migrations so the binary carries
// its own schema.
package migrations

import "embed"

// FS holds the migration files.
//
//go:embed *.sql
var FS embed.FS
