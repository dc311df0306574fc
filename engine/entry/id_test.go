package entry

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"testing"
)

func TestAppendID(t *testing.T) {
	for _, c := range []struct {
		offset int64
		codec  int8
		want   string
	}{
		{0, 0, "0-1"},
		{42, 1, "42-2"},
		{7, 2, "7-3"},
		{1000, 3, "1000-4"},
		{1, 4, "1-5"},
		{math.MaxInt64, 4, "9223372036854775807-5"},
	} {
		if got := string(AppendID(nil, c.offset, c.codec)); got != c.want {
			t.Errorf("AppendID(%d, %d) = %q, want %q", c.offset, c.codec, got, c.want)
		}
	}
	if got := string(AppendID([]byte("("), 5, 0)); got != "(5-1" {
		t.Errorf("AppendID onto a prefix = %q, want %q", got, "(5-1")
	}
}

func TestAppendIDPanicsOnWhatParseIDRefuses(t *testing.T) {
	for _, c := range []struct {
		offset int64
		codec  int8
	}{{-1, 0}, {0, -1}, {0, MaxCodec + 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("AppendID(%d, %d) did not panic", c.offset, c.codec)
				}
			}()
			AppendID(nil, c.offset, c.codec)
		}()
	}
}

func TestParseID(t *testing.T) {
	for _, c := range []struct {
		id     string
		offset int64
		codec  int8
	}{
		{"0-1", 0, 0},
		{"42-2", 42, 1},
		{"1000-4", 1000, 3},
		{"12-5", 12, 4},
		{"9223372036854775807-1", math.MaxInt64, 0},
	} {
		off, codec, err := ParseID([]byte(c.id))
		if err != nil || off != c.offset || codec != c.codec {
			t.Errorf("ParseID(%q) = %d, %d, %v; want %d, %d", c.id, off, codec, err, c.offset, c.codec)
		}
	}
}

func TestParseIDRefusesMalformed(t *testing.T) {
	for _, id := range []string{
		"", "-", "1", "1-", "-1", "12", "a-1", "1-a", "1-0", "1-6", "1-9", "1-10", "1-11",
		"01-1", "00-1", "-1-1", "+1-1", " 1-1", "1-1 ", "1--1", "1-+1",
		"9223372036854775808-1", "18446744073709551615-1", "1-1-1", "1.5-1",
	} {
		off, codec, err := ParseID([]byte(id))
		if !errors.Is(err, ErrBadID) {
			t.Errorf("ParseID(%q) = %d, %d, %v; want ErrBadID", id, off, codec, err)
		}
	}
	_, _, err := ParseID([]byte("1-9"))
	if want := `bad stream entry id "1-9": sequence is not 1 + a codec (1 to 5)`; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestIDHotPathDoesNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 32)
	id := []byte("123456789-3")
	allocs := testing.AllocsPerRun(100, func() {
		buf = AppendID(buf[:0], 123456789, 2)
		if _, _, err := ParseID(id); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("AppendID + ParseID: %v allocations, want 0", allocs)
	}
}

// FuzzID checks that ParseID accepts exactly what AppendID writes: every
// ID it accepts is rewritten byte for byte, and every offset and codec
// survives the round trip.
func FuzzID(f *testing.F) {
	f.Add([]byte("0-1"), int64(0), int8(0))
	f.Add([]byte("9223372036854775807-5"), int64(math.MaxInt64), int8(4))
	f.Add([]byte("01-1"), int64(-1), int8(5))
	f.Add([]byte("1-0"), int64(1700000000000), int8(-1))
	f.Fuzz(func(t *testing.T, id []byte, offset int64, codec int8) {
		if off, c, err := ParseID(id); err == nil {
			if back := AppendID(nil, off, c); !bytes.Equal(back, id) {
				t.Fatalf("ParseID(%q) = %d, %d; AppendID gives %q", id, off, c, back)
			}
		} else if !errors.Is(err, ErrBadID) {
			t.Fatalf("ParseID(%q): error %v is not ErrBadID", id, err)
		}
		if offset < 0 || codec < 0 || codec > MaxCodec {
			return
		}
		b := AppendID(nil, offset, codec)
		if want := strconv.FormatInt(offset, 10) + "-" + strconv.Itoa(int(codec)+1); string(b) != want {
			t.Fatalf("AppendID(%d, %d) = %q, want %q", offset, codec, b, want)
		}
		off, c, err := ParseID(b)
		if err != nil || off != offset || c != codec {
			t.Fatalf("ParseID(AppendID(%d, %d)) = %d, %d, %v", offset, codec, off, c, err)
		}
	})
}
