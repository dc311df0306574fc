// Package duckdbtest checks the cold tier's Parquet files with DuckDB
// (through cgo): the typed value columns of every archived segment read
// back as what was produced. It is a module of its own so that korvet's
// module never depends on DuckDB; run it with
//
//	cd internal/duckdbtest && go test ./...
package duckdbtest
