package web

import (
	"errors"
	"net/http"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// apiError is an admin API failure as it is answered:
// {"error":"<code>","message":"<what happened and what to do>"}.
type apiError struct {
	status int
	code   string // a Kafka error name in lower snake case, or korvet's own
	msg    string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

// invalid is a 400 for a request the caller must fix.
func invalid(msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "invalid_request", msg: msg}
}

// kafkaError is the error of a Kafka answer's code, with the broker's
// message when it sent one and what was being done; nil for code 0.
func kafkaError(code int16, brokerMsg *string, doing string) error {
	if code == 0 {
		return nil
	}
	ke := kerr.TypedErrorForCode(code)
	name, desc := "unknown_server_error", "korvet failed"
	if ke != nil {
		name, desc = strings.ToLower(ke.Message), ke.Description
	}
	msg := doing + ": " + desc
	if brokerMsg != nil && *brokerMsg != "" && *brokerMsg != desc {
		msg = doing + ": " + *brokerMsg
	}
	return &apiError{status: kafkaStatus(code), code: name, msg: msg}
}

// kafkaStatus maps a Kafka error code to its HTTP status (design: 403
// refusals, 404 unknown, 409 conflicts, 400 bad requests, 503 retriable
// coordination trouble, else 500).
func kafkaStatus(code int16) int {
	ke := kerr.TypedErrorForCode(code)
	if ke == nil {
		return http.StatusInternalServerError
	}
	name := ke.Message
	switch {
	case strings.HasSuffix(name, "_AUTHORIZATION_FAILED"):
		return http.StatusForbidden
	case code == kerr.UnknownTopicOrPartition.Code, code == kerr.GroupIDNotFound.Code, code == kerr.ResourceNotFound.Code,
		code == kerr.UnknownTopicID.Code:
		return http.StatusNotFound
	case code == kerr.TopicAlreadyExists.Code, code == kerr.NonEmptyGroup.Code, strings.HasPrefix(name, "DUPLICATE_"):
		return http.StatusConflict
	case strings.HasPrefix(name, "INVALID_"), code == kerr.PolicyViolation.Code, strings.HasPrefix(name, "UNSUPPORTED_"),
		code == kerr.OffsetOutOfRange.Code, code == kerr.MessageTooLarge.Code, code == kerr.RecordListTooLarge.Code:
		return http.StatusBadRequest
	case code == kerr.NotController.Code, code == kerr.LeaderNotAvailable.Code, code == kerr.NotLeaderForPartition.Code,
		strings.HasPrefix(name, "COORDINATOR_"), code == kerr.NotCoordinator.Code, code == kerr.RequestTimedOut.Code,
		code == kerr.RebalanceInProgress.Code, code == kerr.KafkaStorageError.Code:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// errorCode is the "error" field an error is answered with.
func errorCode(err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.code
	}
	return "internal_error"
}

// writeAPIError answers err in the admin API's error shape. Errors that
// are not apiErrors are korvet's own failures: 500, with their text
// (they carry no secrets: request contents never go into them).
func writeAPIError(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{status: http.StatusInternalServerError, code: "internal_error", msg: err.Error()}
	}
	if ae.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, ae.status, map[string]string{"error": ae.code, "message": ae.msg})
}

// apiNotFound answers a path under /api/v1 that no route serves.
func apiNotFound(w http.ResponseWriter, r *http.Request) {
	writeAPIError(w, &apiError{status: http.StatusNotFound, code: "no_such_route",
		msg: "no route " + r.Method + " " + r.URL.Path + " (the routes are listed in GET /api/v1/openapi.json)"})
}
