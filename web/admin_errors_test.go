package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestKafkaErrorStatus(t *testing.T) {
	for _, c := range []struct {
		err  *kerr.Error
		want int
	}{
		{kerr.TopicAuthorizationFailed, 403}, {kerr.GroupAuthorizationFailed, 403}, {kerr.ClusterAuthorizationFailed, 403},
		{kerr.UnknownTopicOrPartition, 404}, {kerr.GroupIDNotFound, 404}, {kerr.ResourceNotFound, 404},
		{kerr.TopicAlreadyExists, 409}, {kerr.NonEmptyGroup, 409}, {kerr.DuplicateResource, 409},
		{kerr.InvalidConfig, 400}, {kerr.InvalidPartitions, 400}, {kerr.PolicyViolation, 400}, {kerr.UnsupportedSaslMechanism, 400},
		{kerr.NotController, 503}, {kerr.LeaderNotAvailable, 503}, {kerr.CoordinatorNotAvailable, 503}, {kerr.RequestTimedOut, 503},
		{kerr.UnknownServerError, 500},
	} {
		err := kafkaError(c.err.Code, nil, "doing it")
		w := httptest.NewRecorder()
		writeAPIError(w, err)
		if w.Code != c.want || !strings.Contains(w.Body.String(), `"error":"`+strings.ToLower(c.err.Message)+`"`) {
			t.Errorf("%s: %d %s, want %d", c.err.Message, w.Code, w.Body, c.want)
		}
		if (w.Code == 503) != (w.Header().Get("Retry-After") == "1") {
			t.Errorf("%s: Retry-After %q", c.err.Message, w.Header().Get("Retry-After"))
		}
	}
	if kafkaError(0, nil, "x") != nil {
		t.Error("code 0 is an error")
	}
	msg := "retention.ms must be a number"
	if err := kafkaError(kerr.InvalidConfig.Code, &msg, "alter configs of topic t"); !strings.Contains(err.Error(), msg) {
		t.Errorf("the broker's message is lost: %v", err)
	}
}

// Without Options.Admin the admin routes answer 503, in the API's shape.
func TestAdminOff(t *testing.T) {
	eng, _ := openEngine(t)
	h := New(eng, Options{Version: "t", Started: time.Now(), Logger: quiet})
	req := httptest.NewRequest("POST", "/api/v1/topics", strings.NewReader(`{"name":"x"}`))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"error":"admin_unavailable"`) {
		t.Errorf("admin API off: %d %s", w.Code, w.Body)
	}
	if eng.Topic("x") != nil {
		t.Error("topic created with the admin API off")
	}
}
