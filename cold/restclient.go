package cold

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/korvet/korvet/cold/icemeta"
	"github.com/korvet/korvet/internal/redact"
)

// restCatalog commits table metadata to an Iceberg REST catalog. It is a
// small client of the spec's table endpoints rather than iceberg-go's
// catalog/rest, which would bring the AWS SDK, OAuth and OpenTelemetry
// into korvet for the few calls needed here. Manifests and data still go
// to the warehouse through korvet's own object store client.
type restCatalog struct {
	base   string // catalog URI + /v1 + optional prefix
	token  string
	root   string
	o      objects
	client *http.Client
}

func newRESTCatalog(uri, token, root string, o objects) (*restCatalog, error) {
	u, err := redact.ParseURL(uri)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("cold: rest catalog URL %q: want http(s)://host[:port][/path]", redact.URL(uri))
	}
	c := &restCatalog{
		base:   strings.TrimRight(uri, "/") + "/v1",
		token:  token,
		root:   root,
		o:      o,
		client: &http.Client{Timeout: time.Minute},
	}
	return c, nil
}

// configure asks the catalog for its settings: a prefix for all paths.
func (c *restCatalog) configure(ctx context.Context) error {
	var cfg struct {
		Overrides map[string]string `json:"overrides"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/config?warehouse="+url.QueryEscape(c.root), nil, &cfg); err != nil {
		return fmt.Errorf("rest catalog config: %w", err)
	}
	if p := cfg.Overrides["prefix"]; p != "" {
		c.base += "/" + strings.Trim(p, "/")
	}
	return nil
}

func (c *restCatalog) kind() string { return "rest" }

func (c *restCatalog) tableLocation(ident tableIdent) string {
	return joinURI(c.root, ident...)
}

// restError is the catalog's error answer.
type restErr struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

// do sends a request and decodes a 2xx answer into out. Other answers
// come back as the status and an error holding the catalog's message.
func (c *restCatalog) do(ctx context.Context, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, redact.URLError(err))
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, redact.URLError(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e restErr
		_ = json.Unmarshal(b, &e)
		msg := e.Error.Message
		if msg == "" {
			msg = strings.TrimSpace(string(b))
		}
		if c.token != "" {
			// A catalog may echo the request, bearer token and all.
			msg = strings.ReplaceAll(msg, c.token, redact.Mask)
		}
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s: %s", method, path, resp.StatusCode, e.Error.Type, msg)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func tablePath(ident tableIdent) string {
	ns := strings.Join(ident[:len(ident)-1], "\x1f")
	return "/namespaces/" + url.PathEscape(ns) + "/tables/" + url.PathEscape(ident[len(ident)-1])
}

func (c *restCatalog) createNamespace(ctx context.Context, ns string) error {
	status, err := c.do(ctx, http.MethodPost, "/namespaces", map[string]any{
		"namespace": []string{ns}, "properties": map[string]string{},
	}, nil)
	if err != nil && status != http.StatusConflict {
		return fmt.Errorf("cold: create namespace %s: %w", ns, err)
	}
	return nil
}

type tableResult struct {
	MetadataLocation string          `json:"metadata-location"`
	Metadata         json.RawMessage `json:"metadata"`
}

func (c *restCatalog) toMeta(ident tableIdent, res tableResult) (*icemeta.Metadata, string, error) {
	meta, err := icemeta.Parse(res.Metadata)
	if err != nil {
		return nil, "", fmt.Errorf("parse metadata of %s: %w", strings.Join(ident, "."), err)
	}
	return meta, res.MetadataLocation, nil
}

func (c *restCatalog) loadTable(ctx context.Context, ident tableIdent) (*icemeta.Metadata, string, error) {
	var res tableResult
	status, err := c.do(ctx, http.MethodGet, tablePath(ident), nil, &res)
	if status == http.StatusNotFound {
		return nil, "", fmt.Errorf("%s: %w", strings.Join(ident, "."), errNoTable)
	}
	if err != nil {
		return nil, "", err
	}
	return c.toMeta(ident, res)
}

// commitTable sends the requirements and updates (the spec's
// CommitTableRequest). A 409 is a lost race, to retry on fresh metadata;
// anything else leaves the outcome unknown and ends the commit.
func (c *restCatalog) commitTable(ctx context.Context, ident tableIdent, reqs []icemeta.Requirement, updates []icemeta.Update) (*icemeta.Metadata, string, error) {
	if reqs == nil {
		reqs = []icemeta.Requirement{}
	}
	body := map[string]any{
		"identifier":   restIdent{Namespace: ident[:len(ident)-1], Name: ident[len(ident)-1]},
		"requirements": reqs,
		"updates":      updates,
	}
	var res tableResult
	status, err := c.do(ctx, http.MethodPost, tablePath(ident), body, &res)
	if status == http.StatusConflict {
		return nil, "", fmt.Errorf("%w: %w", errCommitFailed, err)
	}
	if err != nil {
		return nil, "", err
	}
	return c.toMeta(ident, res)
}

// createTable sends the table's schema, spec, sort order and properties;
// the catalog makes the metadata (keeping the given field ids).
func (c *restCatalog) createTable(ctx context.Context, ident tableIdent, meta *icemeta.Metadata) (*icemeta.Metadata, string, error) {
	body := map[string]any{
		"name":           ident[len(ident)-1],
		"location":       meta.Location,
		"schema":         meta.CurrentSchema(),
		"partition-spec": meta.Spec(),
		"write-order":    json.RawMessage(`{"order-id":0,"fields":[]}`),
		"properties":     meta.Properties,
		"stage-create":   false,
	}
	var res tableResult
	ns := strings.Join(ident[:len(ident)-1], "\x1f")
	status, err := c.do(ctx, http.MethodPost, "/namespaces/"+url.PathEscape(ns)+"/tables", body, &res)
	if status == http.StatusConflict {
		return c.loadTable(ctx, ident)
	}
	if err != nil {
		return nil, "", fmt.Errorf("create table %s: %w", strings.Join(ident, "."), err)
	}
	return c.toMeta(ident, res)
}

func (c *restCatalog) listTables(ctx context.Context, ns string) ([]string, error) {
	var out []string
	token := ""
	for {
		var res struct {
			Identifiers []restIdent `json:"identifiers"`
			Next        string      `json:"next-page-token"`
		}
		p := "/namespaces/" + url.PathEscape(ns) + "/tables"
		if token != "" {
			p += "?pageToken=" + url.QueryEscape(token)
		}
		if _, err := c.do(ctx, http.MethodGet, p, nil, &res); err != nil {
			return nil, err
		}
		for _, id := range res.Identifiers {
			out = append(out, id.Name)
		}
		if res.Next == "" || len(res.Identifiers) == 0 {
			return out, nil
		}
		token = res.Next
	}
}

// dropTable drops the table from the catalog, then deletes its objects
// here: the catalog may have no credentials for the warehouse.
func (c *restCatalog) dropTable(ctx context.Context, ident tableIdent) error {
	status, err := c.do(ctx, http.MethodDelete, tablePath(ident)+"?purgeRequested=false", nil, nil)
	if err != nil && status != http.StatusNotFound {
		return err
	}
	files, err := c.o.list(ctx, c.tableLocation(ident))
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := c.o.remove(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

var _ catalog = (*restCatalog)(nil)
