package grpcweb

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func TestKind(t *testing.T) {
	for ct, want := range map[string]struct {
		text  bool
		codec string
		ok    bool
	}{
		"application/grpc-web":                 {false, "", true},
		"application/grpc-web+proto":           {false, "+proto", true},
		"application/grpc-web-text":            {true, "", true},
		"application/grpc-web-text+proto":      {true, "+proto", true},
		"application/grpc-web+json; charset=x": {false, "+json", true},
		"application/grpc-webx":                {},
		"application/grpc-web+":                {},
		"application/grpc":                     {},
		"application/grpc-web-textual":         {},
		"text/plain":                           {},
	} {
		text, codec, ok := Kind(ct)
		if text != want.text || codec != want.codec || ok != want.ok {
			t.Errorf("Kind(%q) = %v %q %v, want %+v", ct, text, codec, ok, want)
		}
	}
}

// decodeGroups decodes s in 4-character groups each on its own, strictly.
func decodeGroups(s []byte) ([]byte, bool) {
	if len(s)%4 != 0 {
		return nil, false
	}
	var out []byte
	for i := 0; i < len(s); i += 4 {
		b, err := base64.StdEncoding.Strict().DecodeString(string(s[i : i+4]))
		if err != nil || len(b) == 0 {
			return nil, false
		}
		out = append(out, b...)
	}
	return out, true
}

// TestTextDecoder: messages encoded separately (padding in the middle)
// decode as one stream, read a byte at a time or whole; bad text fails.
func TestTextDecoder(t *testing.T) {
	text := base64.StdEncoding.EncodeToString([]byte("ab")) + base64.StdEncoding.EncodeToString([]byte("cdef")) + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 10000))
	want := "abcdef" + strings.Repeat("x", 10000)
	for _, r := range []io.Reader{strings.NewReader(text), iotest.OneByteReader(strings.NewReader(text)), iotest.HalfReader(strings.NewReader(text))} {
		got, err := io.ReadAll(NewTextDecoder(io.NopCloser(r)))
		if err != nil || string(got) != want {
			t.Errorf("decoded %d bytes, %v", len(got), err)
		}
	}
	for _, bad := range []string{"YW", "YW\nJj", "YW=j", "!!!!", "YWJ="} {
		if _, err := io.ReadAll(NewTextDecoder(io.NopCloser(strings.NewReader(bad)))); !errors.Is(err, ErrBadText) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestTrailerFrame: the frame written reads back; names and values that
// could split a line are left out; too many trailers are an error.
func TestTrailerFrame(t *testing.T) {
	tr := http.Header{"Grpc-Status": {"0"}, "Grpc-Message": {"ok"}, "X-A": {"1", "2"}, "Bad\r\nName": {"x"}, "X-B": {"a\r\nb"}}
	b, err := AppendTrailerFrame([]byte("prefix"), tr)
	if err != nil || !bytes.HasPrefix(b, []byte("prefix")) {
		t.Fatal(err)
	}
	if want := "grpc-message: ok\r\ngrpc-status: 0\r\nx-a: 1\r\nx-a: 2\r\n"; string(b[11:]) != want {
		t.Errorf("payload %q, want %q", b[11:], want)
	}
	flag, p, err := ReadFrame(bytes.NewReader(b[6:]), MaxTrailerFrame)
	if err != nil || flag != 0x80 {
		t.Fatal(flag, err)
	}
	got, err := ParseTrailers(p)
	if want := (http.Header{"Grpc-Status": {"0"}, "Grpc-Message": {"ok"}, "X-A": {"1", "2"}}); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("parsed %v, %v", got, err)
	}
	big := http.Header{"X": {strings.Repeat("v", MaxTrailerFrame)}}
	if _, err := AppendTrailerFrame(nil, big); !errors.Is(err, ErrTrailersTooLarge) {
		t.Errorf("a trailer over the bound: %v", err)
	}
	if _, _, err := ReadFrame(bytes.NewReader([]byte{0x80, 0, 1, 0, 0}), MaxTrailerFrame); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("a frame over the bound: %v", err)
	}
	if _, _, err := ReadFrame(bytes.NewReader([]byte{0x02, 0, 0, 0, 0}), MaxTrailerFrame); !errors.Is(err, ErrBadFlag) {
		t.Errorf("flag 2: %v", err)
	}
}

// webText writes data through a -text Writer in the pieces cuts gives,
// flushing after some, then Finish; it returns the base64 body.
func webText(t *testing.T, data []byte, cuts []byte) []byte {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/s/M", strings.NewReader(""))
	req.Header.Set("Content-Type", "application/grpc-web-text")
	w := Start(rec, req)
	if w == nil || req.Header.Get("Content-Type") != "application/grpc" {
		t.Fatal("not started")
	}
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Trailer", "Grpc-Status")
	w.WriteHeader(200)
	for i := 0; len(data) > 0 && i < 1000; i++ {
		n := 1
		if i < len(cuts) {
			n = int(cuts[i])
		}
		n = min(n, len(data))
		if _, err := w.Write(data[:n]); err != nil {
			t.Fatal(err)
		}
		if n%2 == 0 {
			w.Flush()
		}
		data = data[n:]
	}
	if len(data) > 0 {
		_, _ = w.Write(data)
	}
	w.Header().Set("Grpc-Status", "0")
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/grpc-web-text" || rec.Header().Get("Trailer") != "" {
		t.Fatalf("headers %v", rec.Header())
	}
	return rec.Body.Bytes()
}

// FuzzTextWriter: whatever the pieces and flushes, the -text answer is
// whole base64 groups that decode to the bytes written and the trailer
// frame.
func FuzzTextWriter(f *testing.F) {
	f.Add([]byte("hello, world"), []byte{1, 2, 3})
	f.Add(bytes.Repeat([]byte{0xff}, 5000), []byte{7, 200, 0, 1})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		body := webText(t, data, cuts)
		got, ok := decodeGroups(body)
		if !ok {
			t.Fatalf("not whole base64 groups: %q", body)
		}
		want, _ := AppendTrailerFrame(append([]byte(nil), data...), http.Header{"Grpc-Status": {"0"}})
		if !bytes.Equal(got, want) {
			t.Fatalf("decoded % x, want % x", got, want)
		}
	})
}

// FuzzTextDecoder: the decoder accepts exactly what 4-character groups
// decoded one by one accept, and gives the same bytes, however the input
// is cut.
func FuzzTextDecoder(f *testing.F) {
	f.Add([]byte("YWI=Y2RlZg=="), false)
	f.Add([]byte("YW\nJj"), true)
	f.Add([]byte("===="), false)
	f.Fuzz(func(t *testing.T, text []byte, oneByte bool) {
		var r io.Reader = bytes.NewReader(text)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		got, err := io.ReadAll(NewTextDecoder(io.NopCloser(r)))
		want, ok := decodeGroups(text)
		if ok != (err == nil) {
			t.Fatalf("%q: decoder %v, groups ok %v", text, err, ok)
		}
		if ok && !bytes.Equal(got, want) {
			t.Fatalf("%q: % x, want % x", text, got, want)
		}
	})
}

// FuzzTrailerFrame: ReadFrame and ParseTrailers never panic; trailers they
// accept are written back by AppendTrailerFrame (when within its bound)
// and read again the same.
func FuzzTrailerFrame(f *testing.F) {
	f.Add([]byte("\x80\x00\x00\x00\x10grpc-status: 0\r\n"))
	f.Add([]byte("\x80\x00\x00\x00\x05a:\r\n\r\n"))
	f.Add([]byte("\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		flag, p, err := ReadFrame(bytes.NewReader(b), 1<<16)
		if err != nil {
			return
		}
		if len(p) > 1<<16 || flag&^0x81 != 0 || len(b) < 5+len(p) {
			t.Fatalf("frame flag %x, %d bytes from %d", flag, len(p), len(b))
		}
		tr, err := ParseTrailers(p)
		if err != nil {
			return
		}
		out, err := AppendTrailerFrame(nil, tr)
		if errors.Is(err, ErrTrailersTooLarge) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		_, p2, err := ReadFrame(bytes.NewReader(out), MaxTrailerFrame)
		if err != nil {
			t.Fatal(err)
		}
		tr2, err := ParseTrailers(p2)
		if err != nil || !reflect.DeepEqual(tr, tr2) {
			t.Fatalf("%q: %v then %v (%v)", p, tr, tr2, err)
		}
	})
}
