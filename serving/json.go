package serving

// A small JSON parser for request documents: it keeps numbers as written
// and accepts NaN, Infinity and -Infinity (as TensorFlow Serving does),
// and it names JSON types and writes values back the way TensorFlow
// Serving's error messages do.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// jsonNumber is a number token as written in the request, or one of NaN,
// Infinity and -Infinity.
type jsonNumber string

// jsonMaxDepth bounds the nesting of a request document.
const jsonMaxDepth = 512

// parseJSON parses one JSON document into map[string]any, []any,
// jsonNumber, string, bool and nil values. A document of more than
// maxValues values (object keys aside) fails with tooMany as soon as the
// parser meets the value after the last: the memory a parse takes is
// bounded by maxValues, whatever the document's size.
func parseJSON(data []byte, maxValues int, tooMany error) (any, error) {
	p := &jsonParser{data: data, left: maxValues, tooMany: tooMany}
	p.skipSpace()
	if p.pos == len(p.data) {
		return nil, badRequestf("JSON Parse error: The document is empty")
	}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, p.fail("The document root must not be followed by other values")
	}
	return v, nil
}

type jsonParser struct {
	data    []byte
	pos     int
	left    int   // values the document may still hold
	tooMany error // the error once it holds more
	// stack holds the elements of the arrays being parsed: each array is
	// copied out once, at its size, rather than grown by appends.
	stack []any
}

func (p *jsonParser) fail(what string) error {
	return badRequestf("JSON Parse error: %s at offset: %d", what, p.pos)
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) literal(word string) bool {
	if bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		p.pos += len(word)
		return true
	}
	return false
}

func (p *jsonParser) value(depth int) (any, error) {
	if depth > jsonMaxDepth {
		return nil, p.fail(fmt.Sprintf("Nesting deeper than %d", jsonMaxDepth))
	}
	if p.left--; p.left < 0 {
		return nil, p.tooMany
	}
	p.skipSpace()
	if p.pos == len(p.data) {
		return nil, p.fail("Unexpected end of the document")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		if p.literal("-Infinity") {
			return jsonNumber("-Infinity"), nil
		}
		return p.number()
	case p.literal("true"):
		return true, nil
	case p.literal("false"):
		return false, nil
	case p.literal("null"):
		return nil, nil
	case p.literal("NaN"):
		return jsonNumber("NaN"), nil
	case p.literal("Infinity"):
		return jsonNumber("Infinity"), nil
	}
	return nil, p.fail("Invalid value")
}

func (p *jsonParser) object(depth int) (any, error) {
	p.pos++ // {
	obj := map[string]any{}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return obj, nil
	}
	for {
		p.skipSpace()
		if p.pos == len(p.data) || p.data[p.pos] != '"' {
			return nil, p.fail("Missing a name for object member")
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos == len(p.data) || p.data[p.pos] != ':' {
			return nil, p.fail("Missing a colon after a name of object member")
		}
		p.pos++
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		obj[key] = v
		p.skipSpace()
		if p.pos == len(p.data) {
			return nil, p.fail("Missing a comma or '}' after an object member")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return obj, nil
		default:
			return nil, p.fail("Missing a comma or '}' after an object member")
		}
	}
}

func (p *jsonParser) array(depth int) (any, error) {
	p.pos++ // [
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return []any{}, nil
	}
	base := len(p.stack)
	defer func() { clear(p.stack[base:]); p.stack = p.stack[:base] }()
	for {
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		p.stack = append(p.stack, v)
		p.skipSpace()
		if p.pos == len(p.data) {
			return nil, p.fail("Missing a comma or ']' after an array element")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return slices.Clone(p.stack[base:]), nil
		default:
			return nil, p.fail("Missing a comma or ']' after an array element")
		}
	}
}

func (p *jsonParser) str() (string, error) {
	start := p.pos
	p.pos++ // opening quote
	simple := true
	for p.pos < len(p.data) {
		switch c := p.data[p.pos]; {
		case c == '"':
			p.pos++
			raw := p.data[start:p.pos]
			if simple {
				return string(raw[1 : len(raw)-1]), nil
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				p.pos = start
				return "", p.fail("Invalid string")
			}
			return s, nil
		case c == '\\':
			simple = false
			p.pos += 2
		case c < 0x20:
			return "", p.fail("Invalid encoding in string")
		default:
			if c >= 0x80 {
				simple = false // let encoding/json check the UTF-8
			}
			p.pos++
		}
	}
	return "", p.fail("Missing a closing quotation mark in string")
}

func (p *jsonParser) number() (any, error) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.data[p.pos] == '-' {
		p.pos++
	}
	intStart := p.pos
	if digits() == 0 {
		return nil, p.fail("Invalid value")
	}
	if p.data[intStart] == '0' && p.pos-intStart > 1 {
		p.pos = intStart
		return nil, p.fail("Invalid value (a number with a leading zero)")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return nil, p.fail("Missing fraction part in number")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.fail("Missing exponent in number")
		}
	}
	return jsonNumber(p.data[start:p.pos]), nil
}

// jsonTypeName names the JSON type of a parsed value, as TensorFlow Serving
// does in its errors.
func jsonTypeName(v any) string {
	switch v := v.(type) {
	case nil:
		return "Null"
	case bool:
		if v {
			return "True"
		}
		return "False"
	case map[string]any:
		return "Object"
	case []any:
		return "Array"
	case string:
		return "String"
	case jsonNumber:
		return "Number"
	}
	return fmt.Sprintf("%T", v)
}

// jsonText writes a parsed value back as compact JSON for an error
// message, cut after maxEcho bytes (see echo).
func jsonText(v any) string {
	var b strings.Builder
	writeText(&b, v)
	if s := b.String(); len(s) > maxEcho {
		return clip(s, maxEcho) + "…"
	}
	return b.String()
}

// writeText writes v as compact JSON until b holds more than maxEcho
// bytes; a string is written only as far as that needs.
func writeText(b *strings.Builder, v any) {
	if b.Len() > maxEcho {
		return
	}
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case jsonNumber:
		b.WriteString(clip(string(v), maxEcho+1))
	case string:
		q, _ := json.Marshal(clip(v, maxEcho+1))
		b.Write(q)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeText(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		b.WriteByte('{')
		for i, k := range slices.Sorted(maps.Keys(v)) {
			if i > 0 {
				b.WriteByte(',')
			}
			q, _ := json.Marshal(clip(k, maxEcho+1))
			b.Write(q)
			b.WriteByte(':')
			writeText(b, v[k])
		}
		b.WriteByte('}')
	}
}
