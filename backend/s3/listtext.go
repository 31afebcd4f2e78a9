package s3

import (
	"bytes"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// The values of a ListObjectsV2 page (listxml.go): XML text, URL-encoded
// keys, times.

// parseISOTime parses "2006-01-02T15:04:05Z", with 1 to 9 digits of a
// second's fraction or none, as time.Parse would the layouts smithy
// tries; anything else (other forms, out-of-range fields) is left to it.
func parseISOTime(b []byte) (time.Time, bool) {
	if len(b) < 20 || len(b) > 30 || b[len(b)-1] != 'Z' || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return time.Time{}, false
	}
	num := func(s []byte) int {
		n := 0
		for _, c := range s {
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	year, month, day := num(b[0:4]), num(b[5:7]), num(b[8:10])
	hour, minute, sec := num(b[11:13]), num(b[14:16]), num(b[17:19])
	if year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return time.Time{}, false
	}
	if day > daysIn(time.Month(month), year) {
		return time.Time{}, false
	}
	nsec := 0
	if frac := b[19 : len(b)-1]; len(frac) > 0 {
		if len(frac) < 2 || frac[0] != '.' {
			return time.Time{}, false
		}
		digits := frac[1:]
		if nsec = num(digits); nsec < 0 {
			return time.Time{}, false
		}
		for range 9 - len(digits) {
			nsec *= 10
		}
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC), true
}

func daysIn(m time.Month, year int) int {
	return time.Date(year, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// appendText appends the text of an element's raw content: entities and
// character references resolved, CDATA sections as they are, comments and
// processing instructions dropped, line ends read as "\n".
func appendText(dst, raw []byte) ([]byte, error) {
	var prev byte // the last raw byte copied, for "\r\n"
	for len(raw) > 0 {
		i := 0
		for i < len(raw) && raw[i] != '&' && raw[i] != '<' && raw[i] != '\r' {
			i++
		}
		if i > 0 {
			if prev == '\r' && raw[0] == '\n' {
				raw, i = raw[1:], i-1 // "\r\n": the "\n" is written already
			}
			dst = append(dst, raw[:i]...)
			raw = raw[i:]
			prev = 0
			if len(raw) == 0 {
				break
			}
		}
		switch raw[0] {
		case '\r':
			dst = append(dst, '\n')
			raw, prev = raw[1:], '\r'
		case '&':
			r, n, ok := entity(raw)
			if !ok {
				return dst, fmt.Errorf("ListObjectsV2 answer: invalid character entity %.12q", raw)
			}
			dst = utf8.AppendRune(dst, r)
			raw, prev = raw[n:], 0
		case '<':
			switch {
			case bytes.HasPrefix(raw, []byte("<![CDATA[")):
				k := 9 + bytes.Index(raw[9:], []byte("]]>"))
				dst = appendCDATA(dst, raw[9:k])
				raw, prev = raw[k+3:], 0
			case bytes.HasPrefix(raw, []byte("<!--")):
				raw = raw[4+bytes.Index(raw[4:], []byte("-->"))+3:]
			case bytes.HasPrefix(raw, []byte("<?")):
				raw = raw[2+bytes.Index(raw[2:], []byte("?>"))+2:]
			default:
				// scan refuses elements inside a value; this is a
				// span that did not come from scan.
				return dst, fmt.Errorf("ListObjectsV2 answer: markup inside a value")
			}
		}
	}
	return dst, nil
}

// appendCDATA appends a CDATA section's content, line ends read as "\n".
func appendCDATA(dst, raw []byte) []byte {
	var prev byte
	for _, c := range raw {
		switch {
		case c == '\r':
			dst = append(dst, '\n')
		case c == '\n' && prev == '\r':
		default:
			dst = append(dst, c)
		}
		prev = c
	}
	return dst
}

// entity reads the entity or character reference at the start of b
// ("&amp;", "&#38;", "&#x26;"): its character and length. As in
// encoding/xml, a reference past U+10FFFF is refused and a surrogate
// reads as U+FFFD.
func entity(b []byte) (rune, int, bool) {
	end := bytes.IndexByte(b, ';')
	if end < 0 {
		return 0, 0, false
	}
	name := b[1:end]
	if len(name) > 1 && name[0] == '#' {
		digits, base := name[1:], 10
		if digits[0] == 'x' {
			digits, base = digits[1:], 16
		}
		n, err := strconv.ParseUint(string(digits), base, 64)
		if err != nil || n > utf8.MaxRune || len(digits) == 0 || digits[0] == '+' || digits[0] == '_' || bytes.IndexByte(digits, '_') >= 0 {
			return 0, 0, false
		}
		return rune(n), end + 1, true
	}
	switch string(name) {
	case "lt":
		return '<', end + 1, true
	case "gt":
		return '>', end + 1, true
	case "amp":
		return '&', end + 1, true
	case "apos":
		return '\'', end + 1, true
	case "quot":
		return '"', end + 1, true
	}
	return 0, 0, false
}

// unescapeQuery decodes b[start:] in place as url.QueryUnescape would
// ("%2F" a byte, "+" a space), for a page with EncodingType url.
func unescapeQuery(b []byte, start int) ([]byte, error) {
	w := start
	for r := start; r < len(b); r++ {
		switch c := b[r]; c {
		case '%':
			if r+2 >= len(b) || !isHex(b[r+1]) || !isHex(b[r+2]) {
				return b, fmt.Errorf("ListObjectsV2 answer: invalid URL escape %.3q in a url-encoded key", b[r:])
			}
			b[w] = unhex(b[r+1])<<4 | unhex(b[r+2])
			r += 2
		case '+':
			b[w] = ' '
		default:
			b[w] = c
		}
		w++
	}
	return b[:w], nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	default:
		return c - 'a' + 10
	}
}
