package github

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/klauspost/compress/s2"
)

// CacheHeader marks a response the cache produced from a 304: its value is
// CacheRevalidated. The body is the remembered one; the rate-limit headers
// are the 304's.
const (
	CacheHeader      = "X-Prloop-Cache"
	CacheRevalidated = "revalidated"
)

// conditionalTransport makes every GET conditional. It remembers the ETag and
// Last-Modified of each 200 per URL, Accept and credential, sends them as
// If-None-Match / If-Modified-Since, and turns a 304 into the remembered 200
// (marked with CacheHeader), because a 304 does not count against GitHub's
// primary rate limit. It never answers from memory without asking: GitHub's
// Cache-Control: max-age=60 would hide changes for a minute, and a poller
// wants them now.
//
// It sits below the auth layer so it sees the Authorization header it keys on
// (ETags are per token), and keeps only a hash of it.
type conditionalTransport struct {
	next  http.RoundTripper
	cache *lruCache
}

var _ http.RoundTripper = (*conditionalTransport)(nil)

func (t *conditionalTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || t.cache == nil {
		return t.next.RoundTrip(req)
	}
	key := cacheKey(req)
	ent := t.cache.get(key)
	if ent != nil && !refetching(req.Context()) && req.Header.Get("If-None-Match") == "" && req.Header.Get("If-Modified-Since") == "" {
		req = req.Clone(req.Context())
		if ent.etag != "" {
			req.Header.Set("If-None-Match", ent.etag)
		}
		if ent.lastModified != "" {
			req.Header.Set("If-Modified-Since", ent.lastModified)
		}
	} else {
		ent = nil // the caller's own validators: pass their answer through
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusNotModified:
		if ent == nil {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if full := ent.response(resp); full != nil {
			if fresh := ent.freshened(full.Header); fresh != nil {
				t.cache.put(fresh)
			}
			return full, nil
		}
		// Unreadable memory: forget it and ask again, unconditionally.
		t.cache.remove(key)
		retry := req.Clone(req.Context())
		retry.Header.Del("If-None-Match")
		retry.Header.Del("If-Modified-Since")
		return t.RoundTrip(retry)
	case http.StatusOK:
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if e := newEntry(key, resp.Header, body); e != nil {
			t.cache.put(e)
		} else {
			t.cache.remove(key)
		}
		return resp, nil
	case http.StatusNotFound, http.StatusGone, http.StatusUnauthorized:
		t.cache.remove(key)
	}
	return resp, nil
}

type refetchKey struct{}

// refetch marks a request that must not be answered from the cache: the
// retry of an answer that was valid JSON but not a valid object (a pull
// request "{}"), which the cache may have kept with its validators.
func refetch(ctx context.Context) context.Context { return context.WithValue(ctx, refetchKey{}, true) }

func refetching(ctx context.Context) bool { return ctx.Value(refetchKey{}) != nil }

// cacheKey varies on URL, Accept and the credential's identity.
func cacheKey(req *http.Request) string {
	id := ""
	if a := req.Header.Get("Authorization"); a != "" {
		sum := sha256.Sum256([]byte(a))
		id = hex.EncodeToString(sum[:12])
	}
	return req.URL.String() + "\x00" + req.Header.Get("Accept") + "\x00" + id
}

type cacheEntry struct {
	key          string
	etag         string
	lastModified string
	header       http.Header
	// body is kept compressed with S2: GitHub's JSON shrinks several times,
	// so the same byte bound holds several times as many lists (a poller
	// watching 10,000 PRs revalidates about 250 MB of list pages each tick).
	body []byte
	size int64
	// items is the number of elements of a JSON array body, -1 for any
	// other body: what a pagination loop needs to tell a full page from
	// the last one without decompressing the body (see walkPages).
	items int
}

// newEntry returns nil for a response not worth keeping: no validator to
// revalidate with, or a JSON body that does not parse (so a retry after a
// decode error fetches it afresh).
func newEntry(key string, h http.Header, body []byte) *cacheEntry {
	e := &cacheEntry{key: key, etag: h.Get("ETag"), lastModified: h.Get("Last-Modified"), header: h.Clone()}
	if e.etag == "" && e.lastModified == "" {
		return nil
	}
	if mt, _, _ := mime.ParseMediaType(h.Get("Content-Type")); strings.HasSuffix(mt, "json") && !json.Valid(body) {
		return nil
	}
	// EncodeBetter returns a slice of a worst-case-sized buffer; keep only
	// the compressed bytes, or the cache would hold the whole buffer while
	// counting a fraction of it.
	e.body = bytes.Clone(s2.EncodeBetter(nil, body))
	e.items = arrayLen(body)
	e.setSize()
	return e
}

func (e *cacheEntry) setSize() {
	e.size = int64(len(e.key) + len(e.body))
	for k, vs := range e.header {
		for _, v := range vs {
			e.size += int64(len(k) + len(v))
		}
	}
}

// freshened returns the entry with the headers of a revalidated response
// (the 304's merged over the stored ones, RFC 9111 §4.3.4), or nil when
// the validators and Link are unchanged. Link matters most: GitHub sends it
// on a 304, and a page whose items did not change gains a next page when
// the list grows past it; the stored Link would say there is none.
func (e *cacheEntry) freshened(h http.Header) *cacheEntry {
	if slices.Equal(h.Values("Link"), e.header.Values("Link")) && h.Get("ETag") == e.etag && h.Get("Last-Modified") == e.lastModified {
		return nil
	}
	f := &cacheEntry{key: e.key, etag: h.Get("ETag"), lastModified: h.Get("Last-Modified"), header: h.Clone(), body: e.body, items: e.items}
	f.header.Del(CacheHeader)
	f.setSize()
	return f
}

// response builds the 200 that a 304 stands for: remembered body and
// representation headers, the 304's other headers (rate limits, Date, a new
// ETag, a Link that replaces the remembered one), marked as revalidated. It returns nil if the remembered body is
// corrupt, which the caller treats as a miss.
func (e *cacheEntry) response(notModified *http.Response) *http.Response {
	n, err := s2.DecodedLen(e.body)
	if err != nil {
		return nil
	}
	h := e.header.Clone()
	for k, vs := range notModified.Header {
		switch k {
		case "Content-Length", "Content-Type", "Content-Encoding", "Transfer-Encoding":
			continue
		}
		h[k] = append([]string(nil), vs...)
	}
	h.Set(CacheHeader, CacheRevalidated)
	h.Del("Content-Length")
	return &http.Response{
		Status:        "200 OK",
		StatusCode:    http.StatusOK,
		Proto:         notModified.Proto,
		ProtoMajor:    notModified.ProtoMajor,
		ProtoMinor:    notModified.ProtoMinor,
		Header:        h,
		Body:          &cachedBody{compressed: e.body, items: e.items},
		ContentLength: int64(n),
		Request:       notModified.Request,
		TLS:           notModified.TLS,
	}
}

// cachedBody is a remembered body, decompressed only when read. A reader
// that only wants to know whether a list changed (listIfChanged) takes the
// compressed bytes through WriteTo and never pays for decompression.
type cachedBody struct {
	compressed []byte
	items      int // see cacheEntry.items
	r          *bytes.Reader
	err        error
}

var (
	_ io.ReadCloser = (*cachedBody)(nil)
	_ io.WriterTo   = (*cachedBody)(nil)
)

func (b *cachedBody) open() {
	if b.r == nil && b.err == nil {
		body, err := s2.Decode(nil, b.compressed)
		b.r, b.err = bytes.NewReader(body), err
	}
}

// Read decompresses on first use.
func (b *cachedBody) Read(p []byte) (int, error) {
	b.open()
	if b.err != nil {
		return 0, fmt.Errorf("read remembered response: %w", b.err)
	}
	return b.r.Read(p)
}

// WriteTo hands the still-compressed body to a lazySink, and writes the
// decompressed body to any other writer.
func (b *cachedBody) WriteTo(w io.Writer) (int64, error) {
	if s, ok := w.(*lazySink); ok && b.r == nil {
		s.lazy = b
		return 0, nil
	}
	b.open()
	if b.err != nil {
		return 0, fmt.Errorf("read remembered response: %w", b.err)
	}
	return b.r.WriteTo(w)
}

// Close does nothing: the body is memory.
func (b *cachedBody) Close() error { return nil }

// lazySink collects a response body, or, for a remembered one, just a
// handle to it, so the body is decompressed only if someone asks.
type lazySink struct {
	buf  bytes.Buffer
	lazy *cachedBody
}

// Write appends a fresh body's bytes.
func (s *lazySink) Write(p []byte) (int, error) { return s.buf.Write(p) }

// Items returns the number of elements of a JSON array body, -1 for any
// other body, without decompressing a remembered one.
func (s *lazySink) Items() int {
	if s.lazy != nil {
		return s.lazy.items
	}
	return arrayLen(s.buf.Bytes())
}

// Bytes returns the body, decompressing a remembered one.
func (s *lazySink) Bytes() ([]byte, error) {
	if s.lazy == nil {
		return s.buf.Bytes(), nil
	}
	s.lazy.open()
	if s.lazy.err != nil {
		return nil, fmt.Errorf("read remembered response: %w", s.lazy.err)
	}
	return io.ReadAll(s.lazy.r)
}

// lruCache is bounded by bytes (bodies, headers and keys), least recently
// used first out.
type lruCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	order *list.List // front = most recent; values *cacheEntry
	items map[string]*list.Element
}

func newLRU(maxBytes int64) *lruCache {
	return &lruCache{max: maxBytes, order: list.New(), items: map[string]*list.Element{}}
}

func (c *lruCache) get(key string) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return nil
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry)
}

func (c *lruCache) put(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(e.key)
	if e.size > c.max {
		return
	}
	c.items[e.key] = c.order.PushFront(e)
	c.size += e.size
	for c.size > c.max {
		c.removeLocked(c.order.Back().Value.(*cacheEntry).key)
	}
}

func (c *lruCache) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(key)
}

func (c *lruCache) removeLocked(key string) {
	if el, ok := c.items[key]; ok {
		c.order.Remove(el)
		delete(c.items, key)
		c.size -= el.Value.(*cacheEntry).size
	}
}

// stats returns the number of entries and bytes held.
func (c *lruCache) stats() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items), c.size
}

// arrayLen counts the elements of a JSON array in one pass over its bytes,
// without decoding them; it returns -1 for anything else. The body is
// assumed valid JSON (the cache keeps no other).
func arrayLen(b []byte) int {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '[' {
		return -1
	}
	n, depth, inString, empty := 0, 0, false, true
	for i := 1; i < len(b)-1; i++ {
		switch ch := b[i]; {
		case inString:
			switch ch {
			case '\\':
				i++
			case '"':
				inString = false
			}
		case ch == '"':
			inString, empty = true, false
		case ch == '[' || ch == '{':
			depth++
			empty = false
		case ch == ']' || ch == '}':
			depth--
		case ch == ',' && depth == 0:
			n++
		case ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r':
			empty = false
		}
	}
	if empty {
		return 0
	}
	return n + 1
}
