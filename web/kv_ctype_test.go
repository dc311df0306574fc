package web

import "testing"

// The content-type rule of contentType, type by type.
func TestPassiveType(t *testing.T) {
	for in, want := range map[string]string{
		"application/json":                      "application/json",
		"Application/JSON; Charset=UTF-8":       "application/json; charset=UTF-8",
		"application/octet-stream":              "application/octet-stream",
		"application/x-protobuf":                "application/x-protobuf",
		"application/vnd.api+json":              "application/vnd.api+json",
		"text/plain; charset=utf-8":             "text/plain; charset=utf-8",
		"text/csv":                              "text/csv",
		"text/markdown":                         "text/markdown",
		"image/png":                             "image/png",
		"image/webp":                            "image/webp",
		"audio/ogg":                             "audio/ogg",
		"video/mp4":                             "video/mp4",
		"font/woff2":                            "font/woff2",
		"text/html":                             "",
		"TEXT/HTML; charset=utf-8":              "",
		"application/xhtml+xml":                 "",
		"image/svg+xml":                         "",
		"image/SVG":                             "",
		"text/xml":                              "",
		"application/xml":                       "",
		"application/rss+xml":                   "",
		"application/vnd.mozilla.xul+xml":       "",
		"text/xsl":                              "",
		"text/javascript":                       "",
		"application/javascript":                "",
		"application/x-javascript":              "",
		"application/ecmascript":                "",
		"text/css":                              "",
		"text/vnd.wap.wml":                      "",
		"application/pdf":                       "",
		"application/x-shockwave-flash":         "",
		"multipart/x-mixed-replace; boundary=x": "",
		"message/rfc822":                        "",
		"*/*":                                   "",
		"application/*":                         "",
		"x-evil/html":                           "",
		"text/plain\r\nSet-Cookie: a=b":         "",
		"":                                      "",
		"not a type":                            "",
	} {
		if got := passiveType(in); got != want {
			t.Errorf("passiveType(%q) = %q, want %q", in, got, want)
		}
	}
}

// isKVPath is what gets the KV headers, also before the mux cleans a path.
func TestIsKVPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/v1/kv": true, "/v1/kv/": true, "/v1/kv/t/k": true, "/v1//kv/t": true, "/v1/x/../kv/t": true, "//v1/kv": true,
		"/": false, "/v1/kvx": false, "/api/v1/status": false, "/static/app.js": false, "/v1": false,
	} {
		if got := isKVPath(p); got != want {
			t.Errorf("isKVPath(%q) = %v, want %v", p, got, want)
		}
	}
}
