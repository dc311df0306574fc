package cold

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/korvet/korvet/internal/redact"
)

// objects is the warehouse's object store: a bucket reached with minio-go,
// or a local directory. Every method takes a full URI (s3://bucket/key or
// file:///abs/path), the form Iceberg metadata stores, so that paths read
// back from manifests need no translation.
type objects interface {
	// create starts writing an object; nothing is visible until Close
	// succeeds, and Abort drops it.
	create(ctx context.Context, uri string) (objectWriter, error)
	// writeBuffer is what a writer from create holds in memory at most
	// for an object of about n bytes.
	writeBuffer(n int64) int64
	// put writes a small object whole.
	put(ctx context.Context, uri string, data []byte) error
	// putIfAbsent writes a small object unless one exists at uri, in which
	// case it fails with fs.ErrExist. It is the catalog's commit primitive.
	putIfAbsent(ctx context.Context, uri string, data []byte) error
	// get reads a whole object; a missing one is fs.ErrNotExist.
	get(ctx context.Context, uri string) ([]byte, error)
	// readAt reads len(p) bytes at off (one ranged GET on S3).
	readAt(ctx context.Context, uri string, p []byte, off int64) (int, error)
	// size is the object's length; a missing one is fs.ErrNotExist.
	size(ctx context.Context, uri string) (int64, error)
	// remove deletes an object; a missing one is not an error.
	remove(ctx context.Context, uri string) error
	// list returns the URIs of all objects under prefix (a "directory"
	// URI without the trailing slash), in lexical order.
	list(ctx context.Context, prefix string) ([]string, error)
	// dirs returns the names of the immediate "subdirectories" of prefix.
	dirs(ctx context.Context, prefix string) ([]string, error)
}

type objectWriter interface {
	io.Writer
	// Close makes the object visible and reports how many bytes it holds.
	Close() (int64, error)
	Abort()
}

// Stats counts object store traffic. It lets tests and the status page see
// what a cold read costs.
type Stats struct {
	Gets     int64 // GET requests, whole or ranged
	GetBytes int64
	Puts     int64 // objects written
	PutBytes int64
}

type counters struct {
	gets, getBytes, puts, putBytes atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{Gets: c.gets.Load(), GetBytes: c.getBytes.Load(), Puts: c.puts.Load(), PutBytes: c.putBytes.Load()}
}

// --- S3 through minio-go

type s3Objects struct {
	cl     *minio.Client
	bucket string
	region string
	n      *counters
	// partSize bounds the memory of a streaming upload: minio-go buffers one
	// part at a time when the length is not known up front.
	partSize uint64
	// bufs holds the buffers of single-PUT uploads (*[]byte) between
	// uploads: a segment's file grows its buffer to the file's size.
	bufs sync.Pool
}

func newS3Objects(cfg Config, bucket string, n *counters) (*s3Objects, error) {
	endpoint, secure := cfg.Endpoint, cfg.TLS
	if endpoint == "" {
		endpoint, secure = "s3.amazonaws.com", true
	}
	if strings.Contains(endpoint, "://") {
		u, err := redact.ParseURL(endpoint)
		if err != nil {
			return nil, fmt.Errorf("cold: endpoint %q: %w", redact.URL(cfg.Endpoint), err)
		}
		switch u.Scheme {
		case "http":
			secure = false
		case "https":
			secure = true
		default:
			return nil, fmt.Errorf("cold: endpoint %q: scheme must be http or https", redact.URL(cfg.Endpoint))
		}
		endpoint = u.Host
	}
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, fmt.Errorf("cold: s3 transport: %w", err)
	}
	if secure && cfg.InsecureSkipVerify {
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{}
		}
		tr.TLSClientConfig.InsecureSkipVerify = true
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	cl, err := minio.New(endpoint, &minio.Options{
		Creds:        credentialsFor(cfg),
		Secure:       secure,
		Transport:    tr,
		Region:       region,
		BucketLookup: lookup,
		// Archive is retried as a whole by its caller; a few quick retries
		// here ride out a blip without holding a segment for a minute
		// while the store is down.
		MaxRetries: 3,
	})
	if err != nil {
		return nil, fmt.Errorf("cold: s3 client for %s: %w", redact.URL(endpoint), err)
	}
	return &s3Objects{cl: cl, bucket: bucket, region: region, n: n, partSize: 16 << 20}, nil
}

// ensureBucket creates the bucket if it is missing.
func (o *s3Objects) ensureBucket(ctx context.Context) error {
	ok, err := o.cl.BucketExists(ctx, o.bucket)
	if err != nil {
		return fmt.Errorf("bucket %s at %s: %w", o.bucket, o.cl.EndpointURL().Host, err)
	}
	if ok {
		return nil
	}
	err = o.cl.MakeBucket(ctx, o.bucket, minio.MakeBucketOptions{Region: o.region})
	if code := s3Error(err).Code; err != nil && code != "BucketAlreadyOwnedByYou" && code != "BucketAlreadyExists" {
		return fmt.Errorf("create bucket %s at %s: %w", o.bucket, o.cl.EndpointURL().Host, err)
	}
	return nil
}

// credentialsFor takes the keys from the config, else from the environment
// (KORVET_COLD_*, then AWS_*), else from the instance role.
func credentialsFor(cfg Config) *credentials.Credentials {
	if cfg.AccessKey != "" || cfg.SecretKey != "" {
		return credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, "")
	}
	if ak := os.Getenv("KORVET_COLD_ACCESS_KEY"); ak != "" {
		return credentials.NewStaticV4(ak, os.Getenv("KORVET_COLD_SECRET_KEY"), "")
	}
	return credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.IAM{Client: &http.Client{Transport: http.DefaultTransport}},
	})
}

func (o *s3Objects) key(uri string) (string, error) {
	rest, ok := cutScheme(uri, "s3", "s3a", "s3n")
	if !ok {
		return "", fmt.Errorf("cold: %q is not an s3:// URI", uri)
	}
	bucket, key, _ := strings.Cut(rest, "/")
	if bucket != o.bucket {
		return "", fmt.Errorf("cold: %q is outside bucket %s", uri, o.bucket)
	}
	return key, nil
}

func (o *s3Objects) uri(key string) string { return "s3://" + o.bucket + "/" + key }

// s3Error is the S3 error answer inside err, if any.
func s3Error(err error) minio.ErrorResponse {
	var r minio.ErrorResponse
	if errors.As(err, &r) {
		return r
	}
	return minio.ErrorResponse{}
}

// notExist maps S3's "no such key" onto fs.ErrNotExist.
func notExist(err error, uri string) error {
	switch s3Error(err).Code {
	case "NoSuchKey", "NotFound", "NoSuchObject":
		return fmt.Errorf("%s: %w", uri, fs.ErrNotExist)
	}
	return err
}

// s3Writer uploads an object of unknown length: in one PUT when it fits
// in the first buffer (small segments), else streamed as a multipart
// upload, holding one part in memory.
type s3Writer struct {
	ctx  context.Context
	o    *s3Objects
	key  string
	uri  string
	buf  []byte
	pw   *io.PipeWriter // set once streaming has started
	done chan struct{}
	n    int64
	err  error
}

// singlePutMax is the largest object written with one PUT.
const singlePutMax = 8 << 20

// writeBuffer: the whole object up to singlePutMax, then that much and
// the part minio-go fills.
func (o *s3Objects) writeBuffer(n int64) int64 {
	if n <= singlePutMax {
		return n
	}
	return singlePutMax + int64(o.partSize)
}

func (o *s3Objects) create(ctx context.Context, uri string) (objectWriter, error) {
	key, err := o.key(uri)
	if err != nil {
		return nil, err
	}
	w := &s3Writer{ctx: ctx, o: o, key: key, uri: uri}
	if b, ok := o.bufs.Get().(*[]byte); ok {
		w.buf = (*b)[:0]
	}
	return w, nil
}

// recycle keeps the buffer for the next upload, once nothing reads it.
func (w *s3Writer) recycle() {
	if cap(w.buf) > 0 && cap(w.buf) <= singlePutMax {
		b := w.buf[:0]
		w.o.bufs.Put(&b)
	}
	w.buf = nil
}

func (w *s3Writer) Write(p []byte) (int, error) {
	if w.pw != nil {
		return w.pw.Write(p)
	}
	if len(w.buf)+len(p) <= singlePutMax {
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	pr, pw := io.Pipe()
	w.pw, w.done = pw, make(chan struct{})
	go func() {
		defer close(w.done)
		info, err := w.o.cl.PutObject(w.ctx, w.o.bucket, w.key, io.MultiReader(bytes.NewReader(w.buf), pr), -1,
			minio.PutObjectOptions{ContentType: "application/octet-stream", PartSize: w.o.partSize})
		// Unblock a writer still sending when the upload gave up.
		if err != nil {
			pr.CloseWithError(fmt.Errorf("upload failed: %w", err))
			w.err = fmt.Errorf("put %s: %w", w.uri, err)
			return
		}
		pr.CloseWithError(errors.New("upload already complete"))
		w.n = info.Size
		w.o.n.puts.Add(1)
		w.o.n.putBytes.Add(info.Size)
	}()
	return w.pw.Write(p)
}

func (w *s3Writer) Close() (int64, error) {
	if w.pw == nil {
		if err := w.o.put(w.ctx, w.uri, w.buf); err != nil {
			// (The HTTP client may still be sending it: not reused.)
			return 0, err
		}
		n := int64(len(w.buf))
		w.recycle()
		return n, nil
	}
	w.pw.Close()
	<-w.done
	if w.err == nil {
		w.recycle()
	}
	return w.n, w.err
}

func (w *s3Writer) Abort() {
	if w.pw == nil {
		w.recycle() // nothing sent it
		return
	}
	// A reader error makes minio-go abort the multipart upload, so no
	// partial object appears.
	w.pw.CloseWithError(errors.New("upload aborted"))
	<-w.done
}

func (o *s3Objects) put(ctx context.Context, uri string, data []byte) error {
	return o.putOpts(ctx, uri, data, minio.PutObjectOptions{})
}

func (o *s3Objects) putOpts(ctx context.Context, uri string, data []byte, opts minio.PutObjectOptions) error {
	key, err := o.key(uri)
	if err != nil {
		return err
	}
	opts.ContentType = "application/octet-stream"
	if strings.HasSuffix(key, ".json") {
		opts.ContentType = "application/json"
	}
	opts.DisableMultipart = true
	if _, err := o.cl.PutObject(ctx, o.bucket, key, bytes.NewReader(data), int64(len(data)), opts); err != nil {
		return fmt.Errorf("put %s: %w", uri, err)
	}
	o.n.puts.Add(1)
	o.n.putBytes.Add(int64(len(data)))
	return nil
}

func (o *s3Objects) putIfAbsent(ctx context.Context, uri string, data []byte) error {
	var opts minio.PutObjectOptions
	opts.SetMatchETagExcept("*")
	err := o.putOpts(ctx, uri, data, opts)
	if err != nil {
		if r := s3Error(err); r.Code == "PreconditionFailed" || r.StatusCode == http.StatusPreconditionFailed {
			return fmt.Errorf("%s: %w", uri, fs.ErrExist)
		}
	}
	return err
}

func (o *s3Objects) get(ctx context.Context, uri string) ([]byte, error) {
	key, err := o.key(uri)
	if err != nil {
		return nil, err
	}
	obj, err := o.cl.GetObject(ctx, o.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", uri, notExist(err, uri))
	}
	defer obj.Close()
	o.n.gets.Add(1)
	b, err := io.ReadAll(obj)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", uri, notExist(err, uri))
	}
	o.n.getBytes.Add(int64(len(b)))
	return b, nil
}

func (o *s3Objects) readAt(ctx context.Context, uri string, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	key, err := o.key(uri)
	if err != nil {
		return 0, err
	}
	var opts minio.GetObjectOptions
	if err := opts.SetRange(off, off+int64(len(p))-1); err != nil {
		return 0, err
	}
	// The Core API returns the response body directly: one request per
	// range, no client-side seeking or re-fetching.
	body, _, _, err := minio.Core{Client: o.cl}.GetObject(ctx, o.bucket, key, opts)
	if err != nil {
		if s3Error(err).Code == "InvalidRange" {
			return 0, io.EOF
		}
		return 0, fmt.Errorf("get %s [%d,+%d): %w", uri, off, len(p), notExist(err, uri))
	}
	defer body.Close()
	o.n.gets.Add(1)
	n, err := io.ReadFull(body, p)
	o.n.getBytes.Add(int64(n))
	if err == io.ErrUnexpectedEOF {
		err = io.EOF
	}
	if err != nil && err != io.EOF {
		err = fmt.Errorf("get %s [%d,+%d): %w", uri, off, len(p), err)
	}
	return n, err
}

func (o *s3Objects) size(ctx context.Context, uri string) (int64, error) {
	key, err := o.key(uri)
	if err != nil {
		return 0, err
	}
	info, err := o.cl.StatObject(ctx, o.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", uri, notExist(err, uri))
	}
	return info.Size, nil
}

func (o *s3Objects) remove(ctx context.Context, uri string) error {
	key, err := o.key(uri)
	if err != nil {
		return err
	}
	if err := o.cl.RemoveObject(ctx, o.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		if errors.Is(notExist(err, uri), fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("delete %s: %w", uri, err)
	}
	return nil
}

func (o *s3Objects) list(ctx context.Context, prefix string) ([]string, error) {
	key, err := o.key(prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for info := range o.cl.ListObjects(ctx, o.bucket, minio.ListObjectsOptions{Prefix: key + "/", Recursive: true}) {
		if info.Err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, info.Err)
		}
		out = append(out, o.uri(info.Key))
	}
	sort.Strings(out)
	return out, nil
}

func (o *s3Objects) dirs(ctx context.Context, prefix string) ([]string, error) {
	key, err := o.key(prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for info := range o.cl.ListObjects(ctx, o.bucket, minio.ListObjectsOptions{Prefix: key + "/"}) {
		if info.Err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, info.Err)
		}
		if name, ok := strings.CutSuffix(strings.TrimPrefix(info.Key, key+"/"), "/"); ok && name != "" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// --- a local directory

type localObjects struct{ n *counters }

func localPath(uri string) (string, error) {
	if rest, ok := cutScheme(uri, "file"); ok {
		// file:///abs/path: the authority is empty.
		if !strings.HasPrefix(rest, "/") {
			return "", fmt.Errorf("cold: %q: only file:///absolute/path URIs are supported", uri)
		}
		uri = rest
	}
	if !filepath.IsAbs(uri) {
		return "", fmt.Errorf("cold: %q is not an absolute path", uri)
	}
	return filepath.Clean(uri), nil
}

type localWriter struct {
	f    *os.File
	dst  string
	n    int64
	o    *localObjects
	done bool
}

// writeBuffer: a local object is written through to its file.
func (o *localObjects) writeBuffer(int64) int64 { return 0 }

func (o *localObjects) create(_ context.Context, uri string) (objectWriter, error) {
	p, err := localPath(uri)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", uri, err)
	}
	// A temp file renamed into place keeps half-written objects invisible,
	// as an S3 upload does.
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", uri, err)
	}
	return &localWriter{f: f, dst: p, o: o}, nil
}

func (w *localWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.n += int64(n)
	return n, err
}

func (w *localWriter) Close() (int64, error) {
	if w.done {
		return 0, errors.New("cold: object writer already closed")
	}
	w.done = true
	err := w.f.Sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(w.f.Name(), w.dst)
	}
	if err != nil {
		os.Remove(w.f.Name())
		return 0, fmt.Errorf("write %s: %w", w.dst, err)
	}
	syncDir(filepath.Dir(w.dst))
	w.o.n.puts.Add(1)
	w.o.n.putBytes.Add(w.n)
	return w.n, nil
}

func (w *localWriter) Abort() {
	if !w.done {
		w.done = true
		w.f.Close()
		os.Remove(w.f.Name())
	}
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

func (o *localObjects) put(ctx context.Context, uri string, data []byte) error {
	w, err := o.create(ctx, uri)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Abort()
		return fmt.Errorf("write %s: %w", uri, err)
	}
	_, err = w.Close()
	return err
}

func (o *localObjects) putIfAbsent(ctx context.Context, uri string, data []byte) error {
	p, err := localPath(uri)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", uri, err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*.tmp")
	if err != nil {
		return fmt.Errorf("create %s: %w", uri, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", uri, err)
	}
	// link fails when the target exists: an atomic create-if-absent of a
	// complete file.
	if err := os.Link(tmp, p); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", uri, fs.ErrExist)
		}
		return fmt.Errorf("write %s: %w", uri, err)
	}
	syncDir(filepath.Dir(p))
	o.n.puts.Add(1)
	o.n.putBytes.Add(int64(len(data)))
	return nil
}

func (o *localObjects) get(_ context.Context, uri string) ([]byte, error) {
	p, err := localPath(uri)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", uri, err)
	}
	o.n.gets.Add(1)
	o.n.getBytes.Add(int64(len(b)))
	return b, nil
}

func (o *localObjects) readAt(_ context.Context, uri string, p []byte, off int64) (int, error) {
	lp, err := localPath(uri)
	if err != nil {
		return 0, err
	}
	f, err := os.Open(lp)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", uri, err)
	}
	defer f.Close()
	n, err := f.ReadAt(p, off)
	o.n.gets.Add(1)
	o.n.getBytes.Add(int64(n))
	if err != nil && err != io.EOF {
		err = fmt.Errorf("read %s: %w", uri, err)
	}
	return n, err
}

func (o *localObjects) size(_ context.Context, uri string) (int64, error) {
	p, err := localPath(uri)
	if err != nil {
		return 0, err
	}
	st, err := os.Stat(p)
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", uri, err)
	}
	return st.Size(), nil
}

func (o *localObjects) remove(_ context.Context, uri string) error {
	p, err := localPath(uri)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", uri, err)
	}
	return nil
}

func (o *localObjects) list(_ context.Context, prefix string) ([]string, error) {
	root, err := localPath(prefix)
	if err != nil {
		return nil, err
	}
	scheme := strings.HasPrefix(prefix, "file:")
	var out []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || strings.HasSuffix(d.Name(), ".tmp") {
			return nil
		}
		if scheme {
			p = "file://" + filepath.ToSlash(p)
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	sort.Strings(out)
	return out, nil
}

func (o *localObjects) dirs(_ context.Context, prefix string) ([]string, error) {
	root, err := localPath(prefix)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// cutScheme strips "scheme://" for any of the schemes given.
func cutScheme(uri string, schemes ...string) (string, bool) {
	for _, s := range schemes {
		if rest, ok := strings.CutPrefix(uri, s+"://"); ok {
			return rest, true
		}
	}
	return uri, false
}

// joinURI appends path elements to a URI with forward slashes.
func joinURI(base string, elem ...string) string {
	return strings.TrimRight(base, "/") + "/" + path.Join(elem...)
}
