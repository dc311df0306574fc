package testbed

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

func TestVersityGWStopRestart(t *testing.T) {
	s := StartVersityGW(t)
	cl, err := minio.New(s.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Region:       s.Region,
		BucketLookup: minio.BucketLookupPath,
		MaxRetries:   1,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.MakeBucket(ctx, "bkt", minio.MakeBucketOptions{Region: s.Region}); err != nil {
		t.Fatal(err)
	}
	data := []byte("hello cold tier")
	if _, err := cl.PutObject(ctx, "bkt", "dir/k", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	// Objects are plain files under Dir.
	if got, err := os.ReadFile(filepath.Join(s.Dir, "bkt", "dir", "k")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("object on disk: %q, %v", got, err)
	}

	s.Stop()
	if _, err := cl.StatObject(ctx, "bkt", "dir/k", minio.StatObjectOptions{}); err == nil {
		t.Fatal("stat succeeded while the server is stopped")
	}
	s.Restart(t)
	obj, err := cl.GetObject(ctx, "bkt", "dir/k", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(obj)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after restart: %q, %v", got, err)
	}

	// A conditional put refuses to replace an object.
	opts := minio.PutObjectOptions{}
	opts.SetMatchETagExcept("*")
	if _, err := cl.PutObject(ctx, "bkt", "dir/k", bytes.NewReader(data), int64(len(data)), opts); err == nil {
		t.Fatal("If-None-Match put replaced an existing object")
	}
	s.Kill()
	s.Kill() // idempotent
}
