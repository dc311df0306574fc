// Package enginetest opens korvet's engine and cold tier for tests, on the
// real servers package testbed starts. It is apart from testbed because
// the engine's and the cold tier's own package tests use testbed.
package enginetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/korvet/korvet/cold"
	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// Open opens an engine on r, with testbed.Logger unless opts has a
// logger, and closes it and its Redis client when the test ends (closing
// them earlier is fine).
func Open(tb testing.TB, r *testbed.Redis, opts engine.Options) (*engine.Engine, *resp.Client) {
	tb.Helper()
	rc, err := resp.New(r.URL, resp.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if opts.Logger == nil {
		opts.Logger = testbed.Logger()
	}
	e, err := engine.Open(context.Background(), rc, opts)
	if err != nil {
		rc.Close()
		tb.Fatalf("open engine: %v", err)
	}
	tb.Cleanup(func() { e.Close(); rc.Close() })
	return e, rc
}

// Cold opens a cold store with cfg, its footer cache in a temp dir unless
// cfg names one.
func Cold(tb testing.TB, cfg cold.Config) *cold.Store {
	tb.Helper()
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(tb.TempDir(), "cache")
	}
	st, err := cold.Open(context.Background(), cfg, testbed.Logger())
	if err != nil {
		tb.Fatalf("open cold store: %v", err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// LocalWarehouse is a cold tier in a temp dir.
func LocalWarehouse(tb testing.TB) cold.Config {
	return cold.Config{Warehouse: "file://" + filepath.Join(tb.TempDir(), "warehouse")}
}

// S3Warehouse is a cold tier under s3://bucket/wh on versitygw.
func S3Warehouse(s3 *testbed.S3, bucket string) cold.Config {
	return cold.Config{Warehouse: "s3://" + bucket + "/wh", Endpoint: s3.Endpoint, AccessKey: s3.AccessKey,
		SecretKey: s3.SecretKey, Region: s3.Region, PathStyle: true}
}
