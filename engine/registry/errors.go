package registry

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is a refusal the REST layer answers with Confluent's error code and
// HTTP status. Anything else a Registry returns is a backend failure (50001).
type Error struct {
	Code    int    // Confluent error code: 40401, 409, 42201, ...
	HTTP    int    // HTTP status
	Message string // what the client reads
}

func (e *Error) Error() string { return e.Message }

// AsError returns err's *Error, if it wraps one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// The Confluent error codes a Registry returns.
const (
	CodeSubjectNotFound       = 40401
	CodeVersionNotFound       = 40402
	CodeSchemaNotFound        = 40403
	CodeSubjectSoftDeleted    = 40404
	CodeSubjectNotSoftDeleted = 40405
	CodeVersionSoftDeleted    = 40406 // Confluent's numbers (and franz-go's sr):
	CodeVersionNotSoftDeleted = 40407 // soft twice is 40406, permanent first 40407
	CodeSubjectLevelNotFound  = 40408
	CodeSubjectModeNotFound   = 40409
	CodeIncompatible          = 409
	CodeInvalidSchema         = 42201
	CodeInvalidVersion        = 42202
	CodeInvalidLevel          = 42203
	CodeInvalidMode           = 42204
	CodeOperationNotPermitted = 42205
	CodeReferenceExists       = 42206
	CodeIDDoesNotMatch        = 42207
	CodeInvalidSubject        = 42208
	CodeSchemaTooLarge        = 42209
	CodeBackend               = 50001
)

func notFound(code int, format string, args ...any) *Error {
	return &Error{Code: code, HTTP: http.StatusNotFound, Message: fmt.Sprintf(format, args...)}
}

func unprocessable(code int, format string, args ...any) *Error {
	return &Error{Code: code, HTTP: http.StatusUnprocessableEntity, Message: fmt.Sprintf(format, args...)}
}

func errSubjectNotFound(subject string) *Error {
	return notFound(CodeSubjectNotFound, "Subject '%s' not found.", subject)
}

func errVersionNotFound(v int) *Error {
	return notFound(CodeVersionNotFound, "Version %d not found.", v)
}

func errSchemaNotFound(id int32) *Error {
	return notFound(CodeSchemaNotFound, "Schema %d not found", id)
}
