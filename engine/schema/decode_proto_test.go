package schema

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

const protoAll = `syntax = "proto3";
package t;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/struct.proto";

message Order {
  // the order's number
  int32 i32 = 1;
  sint32 s32 = 2;
  sfixed32 f32 = 3;
  int64 i64 = 4;
  sint64 s64 = 5;
  sfixed64 f64 = 6;
  uint32 u32 = 7;
  uint64 u64 = 8;
  fixed64 x64 = 9;
  float fl = 10;
  double db = 11;
  bool ok = 12;
  string name = 13;
  bytes blob = 14;
  Status status = 15;
  repeated string tags = 16;
  map<string, int64> counts = 17;
  map<int32, string> by_num = 18;
  Item item = 19;
  google.protobuf.Timestamp at = 20;
  google.protobuf.Int64Value maybe = 21;
  google.protobuf.StringValue label = 22;
  Node tree = 23;
  google.protobuf.Struct extra = 24;
  optional int32 opt = 25;
  repeated Item items = 26;
  message Item { string sku = 1; }
}
enum Status { UNKNOWN = 0; PAID = 1; }
message Node { int32 v = 1; Node next = 2; }
`

func TestProtoShape(t *testing.T) {
	s := protoOf(t, protoAll)
	want := "Order:struct{i32:int32 s32:int32 f32:int32 i64:int64 s64:int64 f64:int64 u32:int64 u64:int64 x64:int64 fl:float32 db:float64 " +
		"ok:bool name:string blob:binary status:string tags:list[element:string] counts:map[value:int64] by_num:map[value:string] " +
		"item:struct{sku:string} at:timestamp maybe:int64 label:string tree:struct{v:int32 next:json} extra:json opt:int32 " +
		"items:list[element:struct{sku:string}]}"
	if got := shapeString(s.Shape()); got != want {
		t.Fatalf("shape\n got %s\nwant %s", got, want)
	}
	if d := s.Shape().Fields[0].Doc; d != "the order's number" {
		t.Errorf("doc %q", d)
	}
	if sh := protoOf(t, `syntax = "proto3"; enum E { A = 0; }`).Shape(); sh != nil {
		t.Errorf("no message: shape %s", shapeString(sh))
	}
}

// protoPayload marshals m behind the message indexes idx (Confluent's
// framing: zigzag count, zigzag indexes; [0] as the single byte 0).
func protoPayload(t *testing.T, m proto.Message, idx ...int64) []byte {
	t.Helper()
	var p []byte
	if len(idx) == 1 && idx[0] == 0 {
		p = []byte{0}
	} else {
		p = avroLong(p, int64(len(idx)))
		for _, i := range idx {
			p = avroLong(p, i)
		}
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return append(p, b...)
}

func setField(m protoreflect.Message, name string, v protoreflect.Value) {
	m.Set(m.Descriptor().Fields().ByName(protoreflect.Name(name)), v)
}

func TestProtoDecodeAndJSON(t *testing.T) {
	s := protoOf(t, protoAll)
	md := s.file.Messages().Get(0)
	m := dynamicpb.NewMessage(md)
	setField(m, "i32", protoreflect.ValueOfInt32(-5))
	setField(m, "i64", protoreflect.ValueOfInt64(1<<40))
	setField(m, "u32", protoreflect.ValueOfUint32(math.MaxUint32))
	setField(m, "u64", protoreflect.ValueOfUint64(math.MaxUint64)) // past int64: null
	setField(m, "x64", protoreflect.ValueOfUint64(42))
	setField(m, "fl", protoreflect.ValueOfFloat32(0.5))
	setField(m, "name", protoreflect.ValueOfString("n"))
	setField(m, "blob", protoreflect.ValueOfBytes([]byte{1, 2}))
	setField(m, "status", protoreflect.ValueOfEnum(1))
	tags := m.Mutable(md.Fields().ByName("tags")).List()
	tags.Append(protoreflect.ValueOfString("a"))
	counts := m.Mutable(md.Fields().ByName("counts")).Map()
	counts.Set(protoreflect.ValueOfString("c").MapKey(), protoreflect.ValueOfInt64(3))
	byNum := m.Mutable(md.Fields().ByName("by_num")).Map()
	byNum.Set(protoreflect.ValueOfInt32(7).MapKey(), protoreflect.ValueOfString("seven"))
	item := m.Mutable(md.Fields().ByName("item")).Message()
	setField(item, "sku", protoreflect.ValueOfString("S1"))
	at := m.Mutable(md.Fields().ByName("at")).Message()
	setField(at, "seconds", protoreflect.ValueOfInt64(1700000000))
	setField(at, "nanos", protoreflect.ValueOfInt32(123456789))
	maybe := m.Mutable(md.Fields().ByName("maybe")).Message()
	setField(maybe, "value", protoreflect.ValueOfInt64(9))
	tree := m.Mutable(md.Fields().ByName("tree")).Message()
	setField(tree, "v", protoreflect.ValueOfInt32(1))
	next := tree.Mutable(tree.Descriptor().Fields().ByName("next")).Message()
	setField(next, "v", protoreflect.ValueOfInt32(2))

	payload := protoPayload(t, m, 0)
	got, err := s.Decode(payload)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"i32": int32(-5), "s32": int32(0), "f32": int32(0), "i64": int64(1 << 40), "s64": int64(0), "f64": int64(0),
		"u32": int64(math.MaxUint32), "u64": nil, "x64": int64(42), "fl": float32(0.5), "db": 0.0, "ok": false,
		"name": "n", "blob": []byte{1, 2}, "status": "PAID", "tags": []any{"a"}, "counts": map[string]any{"c": int64(3)},
		"by_num": map[string]any{"7": "seven"}, "item": map[string]any{"sku": "S1"}, "at": int64(1700000000123456),
		"maybe": int64(9), "label": nil, "tree": map[string]any{"v": int32(1), "next": `{"v":2}`}, "extra": nil,
		"opt": nil, "items": []any{},
	}
	if !reflect.DeepEqual(got, want) {
		for k := range want {
			if g := got.(map[string]any)[k]; !reflect.DeepEqual(g, want[k]) {
				t.Errorf("%s: got %#v, want %#v", k, g, want[k])
			}
		}
	}
	// The same payload with the explicit index list [0] ("\x02\x00").
	if got2, err := s.Decode(append([]byte{2, 0}, payload[1:]...)); err != nil || !reflect.DeepEqual(got2, got) {
		t.Errorf("explicit [0]: %v", err)
	}

	js, err := s.JSON(payload)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatalf("JSON %s: %v", js, err)
	}
	if back["byNum"] == nil || back["status"] != "PAID" || back["at"] != "2023-11-14T22:13:20.123456789Z" || back["u64"] != "18446744073709551615" {
		t.Errorf("JSON %s", js)
	}

	// Another message by its indexes: Node is [1]; Order.Item is [0, n]
	// with n its place among Order's nested messages, the map entries
	// counted (as in the descriptor, which Confluent's serializers index).
	node := dynamicpb.NewMessage(s.file.Messages().Get(1))
	setField(node, "v", protoreflect.ValueOfInt32(4))
	if js, err := s.JSON(protoPayload(t, node, 1)); err != nil || string(js) != `{"v":4}` {
		t.Errorf("JSON of [1]: %s, %v", js, err)
	}
	if _, err := s.Decode(protoPayload(t, node, 1)); err == nil {
		t.Error("Decode of message [1]: no error")
	}
	itemMD := md.Messages().ByName("Item")
	it := dynamicpb.NewMessage(itemMD)
	setField(it, "sku", protoreflect.ValueOfString("x"))
	if js, err := s.JSON(protoPayload(t, it, 0, int64(itemMD.Index()))); err != nil || string(js) != `{"sku":"x"}` {
		t.Errorf("JSON of [0 %d]: %s, %v", itemMD.Index(), js, err)
	}
}

func TestProtoBadPayloads(t *testing.T) {
	s := protoOf(t, protoAll)
	for name, p := range map[string][]byte{
		"empty":          {},
		"no message 5":   {2, 10},
		"nested 0.3":     {4, 0, 6},
		"negative count": {1},
		"count too big":  avroLong(nil, 1000),
		"junk":           {0, 0xff, 0xff, 0xff},
		"truncated":      {0, 0x6a, 10, 'a'},
		"bad index":      {2, 0x80},
	} {
		if _, err := s.Decode(p); err == nil {
			t.Errorf("%s: Decode: no error", name)
		}
		if _, err := s.JSON(p); err == nil {
			t.Errorf("%s: JSON: no error", name)
		}
	}
}
