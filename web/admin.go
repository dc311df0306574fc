package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/kafkawire"
)

// The admin API (README, "Admin API"): every action is the Kafka request
// that does it, run in process as the HTTP caller through Options.Admin
// (kafkawire.Server.Local), so it is authorized, validated and answered
// exactly as over a Kafka connection. This file holds what the routes
// share: the call itself, request bodies, audit lines.

// AdminFunc runs a Kafka request as the HTTP caller; see Options.Admin.
type AdminFunc func(ctx context.Context, principal string, super bool, host string, req kmsg.Request) (kmsg.Response, error)

// maxAdminBody caps an admin request body: the largest legitimate one is a
// test record, and Produce's own limits are far above what a page sends.
const maxAdminBody = 1 << 20

// adminTimeout bounds one admin action (several Kafka requests at most).
const adminTimeout = 30 * time.Second

// kafkaPrincipal is the principal an HTTP identity runs Kafka requests as.
// The admin socket and the admin token have no Kafka user of their own:
// they get names of the Kafka form (and stay super users).
func kafkaPrincipal(id identity) string {
	switch {
	case strings.HasPrefix(id.principal, "User:"):
		return id.principal
	case id.principal == "":
		return "User:ANONYMOUS"
	default:
		return "User:" + strings.ReplaceAll(id.principal, " ", "-")
	}
}

// kafka runs req as r's caller. A nil Options.Admin (no Kafka server in
// this process, or tests) answers errAdminOff.
func (s *server) kafka(ctx context.Context, r *http.Request, req kmsg.Request) (kmsg.Response, error) {
	if s.opts.Admin == nil {
		return nil, errAdminOff
	}
	id := identityOf(r)
	resp, err := s.opts.Admin(ctx, kafkaPrincipal(id), id.super, id.host, req)
	if errors.Is(err, kafkawire.ErrNotServed) {
		return nil, &apiError{status: http.StatusNotImplemented, code: "not_served", msg: err.Error()}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

var errAdminOff = &apiError{status: http.StatusServiceUnavailable, code: "admin_unavailable", msg: "the admin API is off: this korvet serves no Kafka requests in process"}

// decodeBody reads r's JSON body into v: at most maxAdminBody bytes, no
// unknown fields, one document. Its errors name what to fix.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, maxAdminBody)
	return decodeJSON(body, v)
}

// decodeJSON is decodeBody's decoding, on its own for the fuzz test.
func decodeJSON(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badJSON(err)
	}
	if dec.More() {
		return invalid("the body holds more than one JSON document")
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalid("trailing data after the JSON document")
	}
	return nil
}

// badJSON turns a decoding error into a 400 naming the field at fault.
func badJSON(err error) error {
	var tooBig *http.MaxBytesError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooBig):
		return invalid(fmt.Sprintf("the body is larger than %d bytes", tooBig.Limit))
	case errors.Is(err, io.EOF):
		return invalid("the body is empty: send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("the body is not JSON: it ends in the middle of a value")
	case errors.As(err, &syn):
		return invalid(fmt.Sprintf("the body is not JSON (at byte %d): %v", syn.Offset, err))
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the body"
		}
		return invalid(fmt.Sprintf("field %s: expected %s, got a JSON %s", field, typ.Type, typ.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return invalid(strings.TrimPrefix(err.Error(), "json: ") + " (see GET /api/v1/openapi.json)")
	}
	return invalid("bad JSON body: " + err.Error())
}

// audit logs one admin action: who did what to which resource, and how it
// went. Callers never pass secrets.
func (s *server) audit(r *http.Request, action, resource string, err error) {
	id := identityOf(r)
	outcome := "ok"
	if err != nil {
		outcome = errorCode(err)
	}
	s.log.Info("admin action", "action", action, "principal", id.principal, "host", id.host, "resource", resource, "outcome", outcome)
}

// finish writes an admin action's answer, or its error, and audits it.
func (s *server) finish(w http.ResponseWriter, r *http.Request, action, resource string, status int, body any, err error) {
	s.audit(r, action, resource, err)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, status, body)
}
