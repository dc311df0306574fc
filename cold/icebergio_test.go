package cold

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"time"

	iceio "github.com/apache/iceberg-go/io"
)

// icebergFS lets iceberg-go read manifests (and, in tests, write them and
// scan data files) through korvet's object store, so that one client, one
// set of credentials and one connection pool serve everything. iceberg-go's
// IO methods take no context; the filesystem is built per operation from
// the context of the call that asked for it, so cancellation still reaches
// every request.
type icebergFS struct {
	ctx context.Context
	o   objects
}

var (
	_ iceio.ReadFileIO  = icebergFS{}
	_ iceio.WriteFileIO = icebergFS{}
	_ iceio.StatIO      = icebergFS{}
)

// smallFile is the size up to which Open fetches a whole object in one GET
// (manifests, manifest lists); larger ones are read with ranged GETs.
const smallFile = 4 << 20

func (f icebergFS) Open(name string) (iceio.File, error) {
	size, err := f.o.size(f.ctx, name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	file := &iceFile{ctx: f.ctx, o: f.o, name: name, size: size}
	if size <= smallFile {
		b, err := f.o.get(f.ctx, name)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		file.data = b
		file.size = int64(len(b))
	}
	return file, nil
}

func (f icebergFS) ReadFile(name string) ([]byte, error) {
	b, err := f.o.get(f.ctx, name)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return b, nil
}

func (f icebergFS) Stat(name string) (fs.FileInfo, error) {
	size, err := f.o.size(f.ctx, name)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return fileInfo{name: path.Base(name), size: size}, nil
}

func (f icebergFS) Remove(name string) error {
	if err := f.o.remove(f.ctx, name); err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	return nil
}

func (f icebergFS) WriteFile(name string, p []byte) error {
	if err := f.o.put(f.ctx, name, p); err != nil {
		return &fs.PathError{Op: "write", Path: name, Err: err}
	}
	return nil
}

// Create buffers the file and uploads it on Close: iceberg-go only creates
// manifests and manifest lists this way, which are small.
func (f icebergFS) Create(name string) (iceio.FileWriter, error) {
	return &iceWriter{fs: f, name: name}, nil
}

type iceWriter struct {
	fs   icebergFS
	name string
	buf  bytes.Buffer
}

func (w *iceWriter) Write(p []byte) (int, error)             { return w.buf.Write(p) }
func (w *iceWriter) ReadFrom(r io.Reader) (int64, error)     { return w.buf.ReadFrom(r) }
func (w *iceWriter) Close() error                            { return w.fs.WriteFile(w.name, w.buf.Bytes()) }
func (w *iceWriter) WriteString(s string) (n int, err error) { return w.buf.WriteString(s) }

// iceFile is an open object: in memory when small, else read with one
// ranged GET per ReadAt.
type iceFile struct {
	ctx  context.Context
	o    objects
	name string
	size int64
	data []byte // whole object, when small
	pos  int64
}

func (f *iceFile) Stat() (fs.FileInfo, error) {
	return fileInfo{name: path.Base(f.name), size: f.size}, nil
}

func (f *iceFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrInvalid}
	}
	if off >= f.size {
		return 0, io.EOF
	}
	want := len(p)
	if rem := f.size - off; int64(want) > rem {
		p = p[:rem]
	}
	var n int
	var err error
	if f.data != nil {
		n = copy(p, f.data[off:])
	} else {
		n, err = f.o.readAt(f.ctx, f.name, p, off)
	}
	if err == nil && n < want {
		err = io.EOF
	}
	return n, err
}

func (f *iceFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *iceFile) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.pos
	case io.SeekEnd:
		offset += f.size
	default:
		return 0, errors.New("cold: bad whence")
	}
	if offset < 0 {
		return 0, fmt.Errorf("cold: seek to %d: %w", offset, fs.ErrInvalid)
	}
	f.pos = offset
	return offset, nil
}

func (f *iceFile) Close() error { return nil }

type fileInfo struct {
	name string
	size int64
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) Mode() fs.FileMode  { return 0o444 }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return false }
func (i fileInfo) Sys() any           { return nil }
