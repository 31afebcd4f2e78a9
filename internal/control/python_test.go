package control

import (
	"bytes"
	"context"
	"encoding"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The Python client (python/dsmount/control.py) re-implements the control
// entry's client side. TestPythonClient keeps it honest against this
// package: it describes the protocol from the Go types themselves (by
// reflection, so a field added, renamed or dropped here shows up without
// anyone editing this test), has python/tests/protocol_check.py drive every
// call of the Python client against it, and then parses every request the
// Python client wrote with Buffer, the daemon's own parser.

// systemPython is the interpreter the Python tests use (see
// test/python_test.go): Debian's, whatever python3 comes first on PATH.
const systemPython = "/usr/bin/python3"

// pySpec is what the Python test reads (the file named by
// DSMOUNT_PROTOCOL_SPEC).
type pySpec struct {
	Version   int    `json:"version"`
	RangeSize int    `json:"range_size"`
	EntryName string `json:"entry_name"`
	// The session's ioctls (session.go).
	IoctlSend uint32   `json:"ioctl_send"`
	IoctlRecv uint32   `json:"ioctl_recv"`
	ChunkSize int      `json:"chunk_size"`
	ChunkData int      `json:"chunk_data"`
	Ops       []string `json:"ops"`
	Events    []string `json:"event_types"`
	Codes     []string `json:"codes"`
	// Types are the JSON objects of the protocol by name (a Go type's
	// package-qualified name): their wire field names and what each holds.
	Types   map[string]map[string]pyField `json:"types"`
	Request string                        `json:"request_type"` // the name of Request in Types
	Event   string                        `json:"event_type"`   // the name of Event in Types
	// Table is an example of TableName: the paths, the payload they make
	// and its name.
	Table struct {
		Paths   []string `json:"paths"`
		Payload string   `json:"payload_hex"`
		Name    string   `json:"name"`
	} `json:"table_example"`
	// Lines are event lines as the daemon encodes them (json.Marshal of
	// an Event), every field of the objects they carry set, for the
	// Python test's fake daemon to answer with.
	Lines map[string]string `json:"event_lines"`
	// ErrorLines are one error event line per code, keyed by code (""
	// for an error without one).
	ErrorLines map[string]string `json:"error_lines"`
}

// pyField is one field of a JSON object: its JSON kind (string, int,
// float, bool, array, map, object), the object's type for an object, the
// element's for an array or map.
type pyField struct {
	Kind      string   `json:"kind"`
	Type      string   `json:"type,omitempty"`
	Elem      *pyField `json:"elem,omitempty"`
	OmitEmpty bool     `json:"omitempty,omitempty"`
}

// rawFields say what the protocol's json.RawMessage fields hold, which
// reflection can't see: Event.Stats is a StatsReport encoded ahead.
var rawFields = map[string]reflect.Type{
	"control.Event.stats": reflect.TypeFor[StatsReport](),
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

// specBuilder collects the types reachable from the roots.
type specBuilder struct {
	t     *testing.T
	types map[string]map[string]pyField
	goTyp map[string]reflect.Type
}

func (b *specBuilder) object(t reflect.Type) string {
	name := t.String()
	if _, ok := b.types[name]; ok {
		return name
	}
	if other, ok := b.goTyp[name]; ok && other != t {
		b.t.Fatalf("two types named %s", name)
	}
	fields := map[string]pyField{}
	b.types[name], b.goTyp[name] = fields, t
	depth := map[string]int{}
	b.fields(name, t, fields, depth, 0)
	return name
}

// fields adds t's wire fields to fields as encoding/json names them: a
// tag's name or the Go name, "-" skipped, an untagged embedded struct's
// fields promoted unless a shallower field has the name. (checkEncoding
// compares the result with what encoding/json actually writes.)
func (b *specBuilder) fields(owner string, t reflect.Type, fields map[string]pyField, depth map[string]int, d int) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				b.fields(owner, et, fields, depth, d+1)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if prev, ok := depth[name]; ok {
			if prev == d {
				b.t.Fatalf("%s: two fields named %q at one depth: teach this test which encoding/json keeps", owner, name)
			}
			if prev < d {
				continue
			}
		}
		depth[name] = d
		var pf pyField
		if rt, ok := rawFields[owner+"."+name]; ok {
			pf = b.field(owner+"."+name, rt)
		} else {
			pf = b.field(owner+"."+name, f.Type)
		}
		pf.OmitEmpty = strings.Contains(","+opts+",", ",omitempty,")
		fields[name] = pf
	}
}

func (b *specBuilder) field(where string, t reflect.Type) pyField {
	if t == rawMessage {
		b.t.Fatalf("%s is a json.RawMessage: say in rawFields what it holds", where)
	}
	for _, m := range []reflect.Type{reflect.TypeFor[json.Marshaler](), reflect.TypeFor[encoding.TextMarshaler]()} {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			b.t.Fatalf("%s (%s) encodes itself: reflection can't describe it; teach this test its encoding", where, t)
		}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return b.field(where, t.Elem())
	case reflect.String:
		return pyField{Kind: "string"}
	case reflect.Bool:
		return pyField{Kind: "bool"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return pyField{Kind: "int"}
	case reflect.Float32, reflect.Float64:
		return pyField{Kind: "float"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return pyField{Kind: "bytes"} // base64 in JSON
		}
		e := b.field(where+"[]", t.Elem())
		return pyField{Kind: "array", Elem: &e}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			b.t.Fatalf("%s: a map keyed by %s", where, t.Key())
		}
		e := b.field(where+"{}", t.Elem())
		return pyField{Kind: "map", Elem: &e}
	case reflect.Struct:
		return pyField{Kind: "object", Type: b.object(t)}
	}
	b.t.Fatalf("%s: a %s can't be described", where, t)
	return pyField{}
}

// fill sets v, and every exported field in it, to a value other than its
// zero, so that encoding it writes every field, omitempty or not. n
// numbers the values, so that each is told apart.
func fill(t *testing.T, v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), n)
	case reflect.Slice:
		if v.Type() == rawMessage {
			v.SetBytes([]byte("{}"))
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(t, s.Index(0), n)
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fill(t, v.Index(i), n)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		e := reflect.New(v.Type().Elem()).Elem()
		fill(t, e, n)
		m.SetMapIndex(reflect.ValueOf(fmt.Sprintf("k%d", *n)).Convert(v.Type().Key()), e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), n)
			}
		}
	default:
		t.Fatalf("fill: a %s", v.Type())
	}
}

func filled[T any](t *testing.T) T {
	var x T
	n := 0
	fill(t, reflect.ValueOf(&x).Elem(), &n)
	return x
}

// checkEncoding checks the described fields against encoding/json: a
// value with every field set encodes exactly the fields described.
func (b *specBuilder) checkEncoding() {
	for name, typ := range b.goTyp {
		v := reflect.New(typ)
		n := 0
		fill(b.t, v.Elem(), &n)
		data, err := json.Marshal(v.Interface())
		if err != nil {
			b.t.Fatalf("%s: %v", name, err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			b.t.Fatalf("%s: %v", name, err)
		}
		got, want := slices.Sorted(maps.Keys(m)), slices.Sorted(maps.Keys(b.types[name]))
		if !slices.Equal(got, want) {
			b.t.Fatalf("%s: encoding/json writes fields %q; this test described %q", name, got, want)
		}
	}
}

// constants returns the string values of the package's constants named
// prefix + an upper-case letter (OpWarm, EventPlan, CodeUnknownTable):
// read from the source, so that one added there is checked too.
func constants(t *testing.T, prefixes ...string) map[string][]string {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					for _, p := range prefixes {
						rest, ok := strings.CutPrefix(id.Name, p)
						if !ok || rest == "" || rest[0] < 'A' || rest[0] > 'Z' {
							continue
						}
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							t.Fatalf("%s: constant %s is not a string literal: teach this test", fset.Position(id.Pos()), id.Name)
						}
						val, err := strconv.Unquote(lit.Value)
						if err != nil {
							t.Fatal(err)
						}
						out[p] = append(out[p], val)
					}
				}
			}
		}
	}
	for _, p := range prefixes {
		slices.Sort(out[p])
	}
	return out
}

func eventLine(t *testing.T, ev Event) string {
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func buildSpec(t *testing.T) pySpec {
	b := &specBuilder{t: t, types: map[string]map[string]pyField{}, goTyp: map[string]reflect.Type{}}
	spec := pySpec{Version: Version, RangeSize: RangeSize, EntryName: EntryName, Types: b.types,
		IoctlSend: IoctlSend, IoctlRecv: IoctlRecv, ChunkSize: ChunkSize, ChunkData: ChunkData}
	spec.Request = b.object(reflect.TypeFor[Request]())
	spec.Event = b.object(reflect.TypeFor[Event]())
	b.checkEncoding()

	c := constants(t, "Op", "Event", "Code")
	spec.Ops, spec.Events, spec.Codes = c["Op"], c["Event"], c["Code"]
	// The parse must find at least the constants this test knows by name.
	for _, k := range [][2][]string{
		{spec.Ops, {OpWarm, OpOrder, OpStats, OpCached}},
		{spec.Events, {EventPlan, EventProgress, EventResult, EventError}},
		{spec.Codes, {CodeUnknownTable, CodeUnsupportedVersion}},
	} {
		for _, want := range k[1] {
			if !slices.Contains(k[0], want) {
				t.Fatalf("constants found %q, not %q", k[0], want)
			}
		}
	}

	spec.Table.Paths = []string{"train/a.jpg", "train/b b.jpg", "ü/x.jpg", ""}
	var payload []byte
	for _, p := range spec.Table.Paths {
		payload = append(append(payload, p...), 0)
	}
	if got, err := SplitPaths(payload); err != nil || !slices.Equal(got, spec.Table.Paths) {
		t.Fatalf("the table example's payload splits into %q, %v", got, err)
	}
	spec.Table.Payload, spec.Table.Name = hex.EncodeToString(payload), TableName(payload)

	stats, err := json.Marshal(filled[StatsReport](t))
	if err != nil {
		t.Fatal(err)
	}
	order := filled[OrderResult](t)
	order.Ended = false // what a declaration answers
	ended := filled[OrderResult](t)
	// Paths 1 and 9 of 10 cached.
	cachedAnswer := CachedResult{Files: 10, Cached: 2, Bitmap: []byte{0x02, 0x02}}
	spec.Lines = map[string]string{
		"plan":     eventLine(t, Event{Type: EventPlan, Plan: new(filled[WarmPlan](t))}),
		"progress": eventLine(t, Event{Type: EventProgress, Warm: new(filled[WarmProgress](t))}),
		"warm":     eventLine(t, Event{Type: EventResult, Warm: new(filled[WarmProgress](t))}),
		"order":    eventLine(t, Event{Type: EventResult, Order: &order}),
		"ended":    eventLine(t, Event{Type: EventResult, Order: &ended}),
		"stats":    eventLine(t, Event{Type: EventResult, Stats: stats}),
		"cached":   eventLine(t, Event{Type: EventResult, Cached: &cachedAnswer}),
	}
	spec.ErrorLines = map[string]string{"": eventLine(t, Event{Type: EventError, Error: "order: the declared order names no files"})}
	for _, code := range spec.Codes {
		spec.ErrorLines[code] = eventLine(t, Event{Type: EventError, Error: "refused, code " + code, Code: code})
	}
	return spec
}

// pyRequest is one request the Python client wrote, as the Python test
// recorded it: every byte written, and what the request says.
type pyRequest struct {
	Case string `json:"case"`
	Raw  string `json:"raw"` // base64
	// Expect is what Buffer must decode from Raw.
	Expect struct {
		Op          string   `json:"op"`
		Job         string   `json:"job"`
		Epoch       int      `json:"epoch"`
		End         bool     `json:"end"`
		Paths       []string `json:"paths"`
		Next        []string `json:"next"`
		Table       string   `json:"table"`
		TablePaths  []string `json:"table_paths"`
		Indices     []uint32 `json:"indices"`
		NextIndices []uint32 `json:"next_indices"`
		// Ranges as [offset, length, file] each.
		Ranges     [][3]int64 `json:"ranges"`
		NextRanges [][3]int64 `json:"next_ranges"`
	} `json:"expect"`
}

// TestPythonClient runs python/tests/protocol_check.py against the spec
// of this package's types, then parses the requests it recorded with the
// daemon's parser. It fails, never skips, without /usr/bin/python3.
func TestPythonClient(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	pyDir := filepath.Join(root, "python")
	if _, err := os.Stat(filepath.Join(pyDir, "tests", "protocol_check.py")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(systemPython); err != nil {
		t.Fatalf("%s is needed to test the Python client against the protocol: %v", systemPython, err)
	}

	dir := t.TempDir()
	specPath, outDir := filepath.Join(dir, "spec.json"), filepath.Join(dir, "out")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	specJSON, err := json.MarshalIndent(buildSpec(t), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(specPath, specJSON, 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, systemPython, "-m", "unittest", "-v", "tests.protocol_check")
	cmd.Dir = pyDir
	cmd.Env = append(os.Environ(),
		"DSMOUNT_PROTOCOL_SPEC="+specPath,
		"DSMOUNT_PROTOCOL_OUT="+outDir,
		"PYTHONDONTWRITEBYTECODE=1",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python/tests/protocol_check.py against this package's types: %v\n%s", err, out)
	}
	// A test skipped is a check not made: the Python test skips only
	// without the spec, which this test always gives it.
	if regexp.MustCompile(`\.\.\. skipped|skipped=\d`).Match(out) {
		t.Fatalf("python/tests/protocol_check.py skipped a test:\n%s", out)
	}
	if m := regexp.MustCompile(`Ran (\d+) test`).FindSubmatch(out); m == nil || string(m[1]) == "0" {
		t.Fatalf("python/tests/protocol_check.py ran no test:\n%s", out)
	}
	t.Logf("python/tests/protocol_check.py:\n%s", out)

	checkPythonRequests(t, filepath.Join(outDir, "requests.json"))
}

// checkPythonRequests parses every request the Python client wrote as the
// daemon does, and checks that it says what the Python test meant.
func checkPythonRequests(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the Python test recorded no requests: %v", err)
	}
	var reqs []pyRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields() // an expectation misspelt would check nothing
	if err := dec.Decode(&reqs); err != nil {
		t.Fatal(err)
	}
	if len(reqs) == 0 {
		t.Fatal("the Python test recorded no requests")
	}
	for _, r := range reqs {
		raw, err := base64.StdEncoding.DecodeString(r.Raw)
		if err != nil {
			t.Fatal(err)
		}
		// Buffer ignores fields it does not know (an older daemon must
		// take a newer client's); the client must send none.
		line, _, _ := bytes.Cut(raw, []byte{'\n'})
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(new(Request)); err != nil {
			t.Errorf("%s: request line %s: %v", r.Case, line, err)
			continue
		}
		var buf Buffer
		if !buf.Add(raw) {
			t.Errorf("%s: %d bytes written, the request is not complete: %q", r.Case, len(raw), raw)
			continue
		}
		req, err := buf.Request()
		if err != nil {
			t.Errorf("%s: %v", r.Case, err)
			continue
		}
		var table []string
		if req.TablePayload != nil {
			if table, err = SplitPaths(req.TablePayload); err != nil {
				t.Errorf("%s: table: %v", r.Case, err)
			}
			if TableName(req.TablePayload) != req.Table {
				t.Errorf("%s: table named %s, its TableName is %s", r.Case, req.Table, TableName(req.TablePayload))
			}
		}
		e := r.Expect
		if req.Op != e.Op || req.Job != e.Job || req.Epoch != e.Epoch || req.End != e.End || req.Table != e.Table ||
			!slices.Equal(req.Paths, e.Paths) || !slices.Equal(req.Next, e.Next) || !slices.Equal(table, e.TablePaths) ||
			!slices.Equal(req.Indices, e.Indices) || !slices.Equal(req.NextIndices, e.NextIndices) ||
			!slices.Equal(rangeTriples(req.Ranges), e.Ranges) || !slices.Equal(rangeTriples(req.NextRanges), e.NextRanges) {
			t.Errorf("%s: the daemon reads op %q job %q epoch %d end %v table %q paths %q next %q table paths %q indices %v next %v;\nthe client meant %+v",
				r.Case, req.Op, req.Job, req.Epoch, req.End, req.Table, req.Paths, req.Next, table, req.Indices, req.NextIndices, e)
		}
	}
	t.Logf("%d requests of the Python client parsed by Buffer", len(reqs))
}

// rangeTriples is rs as the Python test writes what it meant.
func rangeTriples(rs []Range) [][3]int64 {
	var out [][3]int64
	for _, r := range rs {
		out = append(out, [3]int64{r.Offset, int64(r.Length), int64(r.File)})
	}
	return out
}
