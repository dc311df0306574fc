package schema

import (
	"encoding/json"
	"testing"
)

// FuzzDecode feeds arbitrary payloads to the three formats' Decode and
// JSON: each answers a value or an error, never a panic or a hang, and
// what JSON answers is JSON.
func FuzzDecode(f *testing.F) {
	avroS := avroOf(f, avroAll)
	list := avroOf(f, `{"type":"record","name":"N","fields":[{"name":"a","type":{"type":"array","items":"null"}},{"name":"next","type":["null","N"]},{"name":"m","type":{"type":"map","values":{"type":"bytes","logicalType":"decimal","precision":9,"scale":3}}}]}`)
	jsonS := jsonOf(f, jsonAll, jsonRefs)
	protoS := protoOf(f, protoAll)
	schemas := []Schema{avroS, list, jsonS, protoS}
	typed, err := NewTyped("f-value", []int32{1, 2}, []Schema{avroS, list})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(0), []byte{})
	f.Add(uint8(1), []byte{2, 0, 2, 2, 0, 0, 0})
	f.Add(uint8(2), []byte(`{"count":1,"tags":["a"],"attrs":{"x":1},"tree":{"kids":[{}]}}`))
	f.Add(uint8(3), []byte{0, 0x08, 0x05, 0x82, 0x01, 0x01, 'a'})
	f.Add(uint8(3), []byte{4, 0, 2, 10, 1, 'x'})
	f.Fuzz(func(t *testing.T, which uint8, payload []byte) {
		s := schemas[int(which)%len(schemas)]
		_, _ = s.Decode(payload)
		if js, err := s.JSON(payload); err == nil && !json.Valid(js) {
			t.Fatalf("%s: JSON %q is not JSON", s.Format(), js)
		}
		_, _ = typed.Decode(append(AppendFrame(nil, int32(which%2)+1), payload...))
	})
}
