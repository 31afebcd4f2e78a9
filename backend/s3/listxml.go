package s3

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	smithytime "github.com/aws/smithy-go/time"
)

// A ListObjectsV2 answer is decoded here by hand rather than by the SDK's
// deserializer, which walks encoding/xml's tokens (read byte by byte
// through bufio, a token allocated for each tag): on a large listing that
// was most of a first mount's time. This decoder finds the tags with
// bytes.IndexByte, keeps only what List uses, and allocates a few strings
// per page rather than several per key.
//
// It reads what the SDK reads, the same way, wherever the SDK succeeds:
// element names matched case-insensitively after any namespace prefix,
// the five predefined entities and numeric character references, CDATA
// sections, "\r\n" and "\r" read as "\n", the last of repeated elements
// winning, unknown elements skipped at any depth. Where the SDK would
// refuse a page it is more lenient (characters XML forbids, a comment
// inside a value): those refusals protect nothing a listing needs.
//
// Unlike the SDK, List asks for encoding-type=url (listraw.go): keys and
// common prefixes then come percent-encoded, so a key holding a character
// that XML 1.0 can't carry (a control character, a lone "\r") is listed
// as it is, where the SDK's page would fail to parse or turn "\r" into
// "\n". A page says whether it was encoded (a store may ignore the
// parameter), and only then are those values decoded.

// listObject is what List needs of one listed object.
type listObject struct {
	key     string
	size    int64
	modTime time.Time // zero: the store gave none
	etag    string    // as the store gave it, quotes and all; "" if none
}

// listPage is what List needs of one ListObjectsV2 answer.
type listPage struct {
	objs      []listObject
	prefixes  []string // the CommonPrefixes
	truncated bool
	next      string // NextContinuationToken
}

// span is a value's raw text in the page: the bytes between its element's
// start and end tags. The zero span is an element that was not there (a
// value never starts at 0: a tag comes before it).
type span struct{ start, end int }

func (s span) ok() bool { return s.start > 0 }

// rawObject is a Contents element's values, before decoding.
type rawObject struct{ key, lastModified, etag, size span }

// pageDecoder decodes pages; it keeps its buffers from one page to the next.
// Not safe for concurrent use.
type pageDecoder struct {
	objs     []rawObject
	prefixes []span
	stack    []span // names of the open elements
	arena    []byte // decoded keys, prefixes and ETags of a page
	offs     []int  // their ends in arena
	scratch  []byte
	body     []byte // the page as read, kept for the next one

	// The last LastModified text and its time: objects uploaded together
	// share it, and parsing it again is the costliest part of an object.
	lastLM   []byte
	lastTime time.Time

	page listPage
}

// pageValues are the spans of the page's own values that List uses.
type pageValues struct {
	truncated, next, encoding span
}

// decode parses one page. The page it returns, and its slices, are reused
// by the next call; its strings are not.
func (d *pageDecoder) decode(in []byte) (*listPage, error) {
	var v pageValues
	if err := d.scan(in, &v); err != nil {
		return nil, err
	}
	return d.build(in, &v)
}

// syntaxError is a page that is not the XML it should be.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("ListObjectsV2 answer: byte %d: %s", e.off, e.msg)
}

// Element kinds at the root's children level.
const (
	inOther = iota
	inContents
	inPrefixes
)

// scan finds the spans of the values List uses, checking the elements
// nest properly.
func (d *pageDecoder) scan(in []byte, v *pageValues) error {
	d.objs, d.prefixes, d.stack = d.objs[:0], d.prefixes[:0], d.stack[:0]
	*v = pageValues{}
	var (
		cur     rawObject
		prefix  span
		in2     = inOther // the kind of the open child of the root
		leaf    *span     // the value being read, when inside one
		started bool      // the root element has begun
	)
	i := 0
	for {
		j := bytes.IndexByte(in[i:], '<')
		if j < 0 {
			if !started {
				// No element at all: the SDK reads an empty page.
				return nil
			}
			return &syntaxError{len(in), "unexpected end: the root element is not closed"}
		}
		i += j
		rest := in[i:]
		var next byte // what follows '<' tells markup from tags at once
		if len(rest) > 1 {
			next = rest[1]
		}
		switch {
		case next == '!' && bytes.HasPrefix(rest, []byte("<!--")):
			k := bytes.Index(rest[4:], []byte("-->"))
			if k < 0 {
				return &syntaxError{i, "unterminated comment"}
			}
			i += 4 + k + 3
		case next == '!' && bytes.HasPrefix(rest, []byte("<![CDATA[")):
			k := bytes.Index(rest[9:], []byte("]]>"))
			if k < 0 {
				return &syntaxError{i, "unterminated CDATA section"}
			}
			i += 9 + k + 3
		case next == '?':
			k := bytes.Index(rest[2:], []byte("?>"))
			if k < 0 {
				return &syntaxError{i, "unterminated processing instruction"}
			}
			i += 2 + k + 2
		case next == '!':
			if leaf != nil {
				return &syntaxError{i, "markup inside a value"}
			}
			k := directiveEnd(rest)
			if k < 0 {
				return &syntaxError{i, "unterminated directive"}
			}
			i += k
		case next == '/':
			if len(d.stack) == 0 {
				return &syntaxError{i, "end tag without a start"}
			}
			open := d.stack[len(d.stack)-1]
			want := in[open.start:open.end]
			// Mostly "</name>" of the open element: checked in place.
			k := 2 + len(want)
			if k >= len(rest) || rest[k] != '>' || !bytes.Equal(rest[2:k], want) {
				if k = bytes.IndexByte(rest, '>'); k < 0 {
					return &syntaxError{i, "unterminated end tag"}
				}
				n := k
				for n > 2 && isSpace(rest[n-1]) {
					n--
				}
				if name := rest[2:n]; !bytes.Equal(name, want) {
					return &syntaxError{i, fmt.Sprintf("element <%s> closed by </%s>", want, name)}
				}
			}
			d.stack = d.stack[:len(d.stack)-1]
			if leaf != nil {
				leaf.end = i
				leaf = nil
			}
			i += k + 1
			switch len(d.stack) {
			case 0:
				return nil // the root closed: the rest is not read, as by the SDK
			case 1:
				d.closeChild(in2, &cur, prefix)
			}
		default:
			n := 1
			for n < len(rest) && !isSpace(rest[n]) && rest[n] != '/' && rest[n] != '>' {
				n++
			}
			if n == 1 {
				return &syntaxError{i, "element without a name"}
			}
			// Mostly "<name>" or "<name/>"; attributes need tagEnd.
			k, selfClosing := n, false
			switch {
			case n < len(rest) && rest[n] == '>':
			case n+1 < len(rest) && rest[n] == '/' && rest[n+1] == '>':
				k, selfClosing = n+1, true
			default:
				if k, selfClosing = tagEnd(rest); k < 0 {
					return &syntaxError{i, "unterminated start tag"}
				}
			}
			if leaf != nil {
				return &syntaxError{i, "element inside a value"}
			}
			name := span{i + 1, i + n}
			started = true
			switch len(d.stack) {
			case 1:
				local := localName(in[name.start:name.end])
				ascii := isASCII(local)
				in2 = inOther
				switch {
				case nameIs(local, ascii, "Contents"):
					in2, cur = inContents, rawObject{}
				case nameIs(local, ascii, "CommonPrefixes"):
					in2, prefix = inPrefixes, span{}
				case nameIs(local, ascii, "IsTruncated"):
					leaf = &v.truncated
				case nameIs(local, ascii, "NextContinuationToken"):
					leaf = &v.next
				case nameIs(local, ascii, "EncodingType"):
					leaf = &v.encoding
				}
			case 2:
				if in2 == inOther {
					break
				}
				local := localName(in[name.start:name.end])
				ascii := isASCII(local)
				switch {
				case in2 == inContents && nameIs(local, ascii, "Key"):
					leaf = &cur.key
				case in2 == inContents && nameIs(local, ascii, "LastModified"):
					leaf = &cur.lastModified
				case in2 == inContents && nameIs(local, ascii, "ETag"):
					leaf = &cur.etag
				case in2 == inContents && nameIs(local, ascii, "Size"):
					leaf = &cur.size
				case in2 == inPrefixes && nameIs(local, ascii, "Prefix"):
					leaf = &prefix
				}
			}
			i += k + 1
			if leaf != nil {
				leaf.start = i
			}
			if !selfClosing {
				d.stack = append(d.stack, name)
				continue
			}
			if leaf != nil {
				leaf.end, leaf = i, nil
			}
			switch len(d.stack) {
			case 0:
				return nil // <ListBucketResult/>: an empty page
			case 1:
				d.closeChild(in2, &cur, prefix)
			}
		}
	}
}

// closeChild records a Contents or CommonPrefixes element that has ended.
// Either is kept even without the values List wants, as the SDK keeps it.
func (d *pageDecoder) closeChild(kind int, cur *rawObject, prefix span) {
	switch kind {
	case inContents:
		d.objs = append(d.objs, *cur)
	case inPrefixes:
		d.prefixes = append(d.prefixes, prefix)
	}
}

// tagEnd finds the '>' that ends the start tag at the beginning of b,
// skipping quoted attribute values, and reports whether it is "/>".
func tagEnd(b []byte) (int, bool) {
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '"', '\'':
			k := bytes.IndexByte(b[i+1:], b[i])
			if k < 0 {
				return -1, false
			}
			i += 1 + k
		case '>':
			return i, b[i-1] == '/'
		}
	}
	return -1, false
}

// directiveEnd is the length of the <!...> directive (a DOCTYPE) at the
// beginning of b, read as encoding/xml reads one: the byte after "<!" as
// it is, then to the first '>' outside quotes, nested brackets and
// comments; -1 if it doesn't end.
func directiveEnd(b []byte) int {
	depth := 0
	var quote byte
	for i := 3; i < len(b); i++ {
		switch c := b[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '>' && depth == 0:
			return i + 1
		case c == '"' || c == '\'':
			quote = c
		case c == '>':
			depth--
		case c == '<' && bytes.HasPrefix(b[i:], []byte("<!--")):
			k := bytes.Index(b[i+4:], []byte("-->"))
			if k < 0 {
				return -1
			}
			i += 4 + k + 2
		case c == '<':
			depth++
		}
	}
	return -1
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// localName drops a namespace prefix ("s3:Key"), as encoding/xml does.
func localName(name []byte) []byte {
	if i := bytes.IndexByte(name, ':'); i >= 1 && i <= len(name)-2 {
		return name[i+1:]
	}
	return name
}

// nameIs matches element names as the SDK does: case-insensitively,
// Unicode folding included. ascii says name is all ASCII.
func nameIs(name []byte, ascii bool, want string) bool {
	if len(name) != len(want) {
		// A non-ASCII name can still fold to an ASCII one (the Kelvin
		// sign to "k"), of another length.
		return !ascii && strings.EqualFold(string(name), want)
	}
	for i := range len(name) {
		c, w := name[i], want[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if 'a' <= w && w <= 'z' {
			w -= 'a' - 'A'
		}
		if c != w {
			return !ascii && strings.EqualFold(string(name), want)
		}
	}
	return true
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// build decodes the spans the scan found into d.page.
func (d *pageDecoder) build(in []byte, v *pageValues) (*listPage, error) {
	p := &d.page
	*p = listPage{objs: p.objs[:0], prefixes: p.prefixes[:0]}
	var err error
	urlEncoded := false
	if v.encoding.ok() {
		d.scratch, err = appendText(d.scratch[:0], in[v.encoding.start:v.encoding.end])
		if err != nil {
			return nil, err
		}
		urlEncoded = string(d.scratch) == "url"
	}
	if v.truncated.ok() {
		d.scratch, err = appendText(d.scratch[:0], in[v.truncated.start:v.truncated.end])
		if err != nil {
			return nil, err
		}
		if p.truncated, err = strconv.ParseBool(string(d.scratch)); err != nil {
			return nil, fmt.Errorf("ListObjectsV2 answer: IsTruncated %q: %w", d.scratch, err)
		}
	}
	if v.next.ok() {
		d.scratch, err = appendText(d.scratch[:0], in[v.next.start:v.next.end])
		if err != nil {
			return nil, err
		}
		p.next = string(d.scratch)
	}

	// Keys, prefixes and ETags go into one arena, which becomes one
	// string: two allocations a page rather than two a key.
	d.arena, d.offs = d.arena[:0], d.offs[:0]
	add := func(s span, urlEnc bool) error {
		if s.ok() {
			start := len(d.arena)
			if d.arena, err = appendText(d.arena, in[s.start:s.end]); err != nil {
				return err
			}
			if urlEnc {
				if d.arena, err = unescapeQuery(d.arena, start); err != nil {
					return err
				}
			}
		}
		d.offs = append(d.offs, len(d.arena))
		return nil
	}
	for i := range d.objs {
		o := &d.objs[i]
		if err := add(o.key, urlEncoded); err != nil {
			return nil, err
		}
		if err := add(o.etag, false); err != nil {
			return nil, err
		}
	}
	for _, s := range d.prefixes {
		if err := add(s, urlEncoded); err != nil {
			return nil, err
		}
	}
	arena := string(d.arena)
	str := func(k int) string {
		if k == 0 {
			return arena[:d.offs[0]]
		}
		return arena[d.offs[k-1]:d.offs[k]]
	}

	for i := range d.objs {
		o := &d.objs[i]
		lo := listObject{key: str(2 * i), etag: str(2*i + 1)}
		if o.size.ok() {
			if lo.size, err = d.parseSize(in[o.size.start:o.size.end]); err != nil {
				return nil, err
			}
		}
		if o.lastModified.ok() {
			if lo.modTime, err = d.parseTime(in[o.lastModified.start:o.lastModified.end]); err != nil {
				return nil, err
			}
		}
		p.objs = append(p.objs, lo)
	}
	for i := range d.prefixes {
		p.prefixes = append(p.prefixes, str(2*len(d.objs)+i))
	}
	return p, nil
}

// parseSize reads a Size as the SDK does (strconv.ParseInt, base 10).
func (d *pageDecoder) parseSize(raw []byte) (int64, error) {
	if len(raw) > 0 && len(raw) <= 18 {
		n := int64(0)
		for _, c := range raw {
			if c < '0' || c > '9' {
				goto slow
			}
			n = n*10 + int64(c-'0')
		}
		return n, nil
	}
slow:
	var err error
	if d.scratch, err = appendText(d.scratch[:0], raw); err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(d.scratch), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("ListObjectsV2 answer: Size: %w", err)
	}
	return n, nil
}

// parseTime reads a LastModified as the SDK does (smithy's ParseDateTime),
// the common form without its help.
func (d *pageDecoder) parseTime(raw []byte) (time.Time, error) {
	if d.lastLM != nil && bytes.Equal(raw, d.lastLM) {
		return d.lastTime, nil
	}
	t, ok := parseISOTime(raw)
	if !ok {
		var err error
		if d.scratch, err = appendText(d.scratch[:0], raw); err != nil {
			return time.Time{}, err
		}
		if t, err = smithytime.ParseDateTime(string(d.scratch)); err != nil {
			return time.Time{}, fmt.Errorf("ListObjectsV2 answer: LastModified: %w", err)
		}
	}
	d.lastLM, d.lastTime = append(d.lastLM[:0], raw...), t
	return t, nil
}
