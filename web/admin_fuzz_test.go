package web

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"testing"
	"unicode/utf8"
)

// FuzzAdminJSON feeds hostile bodies to the admin API's decoders: each
// either decodes or fails with a 400 invalid_request, never a panic; what
// decodes goes through the checks that come before any Kafka request.
func FuzzAdminJSON(f *testing.F) {
	for _, s := range []string{
		`{"name":"t","partitions":3,"configs":{"retention.ms":"1"}}`,
		`{"set":{"a":"b"},"delete":["c"]}`, `{"count":4}`,
		`{"partitions":[{"partition":0,"before":-1}]}`,
		`{"partition":-1,"key":"k","value":"v","encoding":"base64","headers":[{"key":"h","value":"x"}]}`,
		`{"topic":"t","partitions":[0,1],"to":"timestamp","timestamp":1,"dry_run":true}`,
		`{"mechanism":"SCRAM-SHA-512","password":"p","iterations":4096}`,
		`{"resource_type":"TOPIC","resource_name":"x","pattern":"Prefixed","principal":"User:a","host":"*","operation":"DESCRIBE_CONFIGS","permission":"deny"}`,
		`{"a":1} {"b":2}`, `[`, `{"name":"\ud800"}`, "\xff\xfe", `{"count":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		targets := []any{&topicCreateBody{}, &alterConfigsBody{}, &addPartitionsBody{}, &deleteRecordsBody{}, &produceBody{},
			&resetOffsetsBody{}, &userSetBody{}, &aclJSON{}}
		for _, v := range targets {
			w := httptest.NewRecorder()
			r := httptest.NewRequest("POST", "/api/v1/x", bytes.NewReader(body))
			err := decodeBody(w, r, v)
			if err != nil {
				var ae *apiError
				if !errors.As(err, &ae) || ae.status != 400 || ae.code != "invalid_request" || ae.msg == "" {
					t.Fatalf("decoding into %T: %v, want a 400 invalid_request", v, err)
				}
				continue
			}
			if a, ok := v.(*aclJSON); ok {
				_, _ = parseACL(*a, false)
				_, _ = parseACL(*a, true)
			}
		}
		for _, max := range []int{0, 1, 7, valueBytesDefault} {
			v := renderValue(body, max)
			if v.Size != len(body) || v.Truncated != (len(body) > max) {
				t.Fatalf("renderValue(%d bytes, %d): size %d truncated %v", len(body), max, v.Size, v.Truncated)
			}
			if v.Text != nil && (!utf8.ValidString(*v.Text) || len(*v.Text) > max) {
				t.Fatalf("renderValue: text %q over %d bytes or not UTF-8", *v.Text, max)
			}
		}
	})
}
