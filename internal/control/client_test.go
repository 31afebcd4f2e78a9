package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestAnswerErrorsAreTheDaemonsWords: an "error" event ends the answer
// as a DaemonError carrying the daemon's message on one line; events
// before it were handed on; a line that is not an event is a malformed
// answer.
func TestAnswerErrorsAreTheDaemonsWords(t *testing.T) {
	var seen []string
	in := `{"type":"plan","plan":{"files":2}}` + "\n" + `{"type":"error","error":"order: a mount may have\nat most 256 jobs","code":"some_code"}` + "\n" + `{"type":"result"}` + "\n"
	err := ReadAnswer(strings.NewReader(in), "/mnt/x", func(ev Event) error { seen = append(seen, ev.Type); return nil })
	var de DaemonError
	if !errors.As(err, &de) || de.Message != "order: a mount may have at most 256 jobs" || de.Code != "some_code" || len(seen) != 1 {
		t.Errorf("readAnswer: %v (%T), events %v; want the daemon's one line after the plan", err, err, seen)
	}
	err = ReadAnswer(strings.NewReader("not json\n"), "/mnt/x", func(Event) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "malformed answer from /mnt/x") || errors.As(err, &de) {
		t.Errorf("readAnswer of a line that is not JSON: %v", err)
	}
}

// TestEncodePayloadReadsBack: what Call sends of a request with paths, a
// table and indices is what the daemon's Buffer reads.
func TestEncodePayloadReadsBack(t *testing.T) {
	table := []byte("a.jpg\x00b.jpg\x00")
	for _, req := range []Request{
		{Op: OpOrder, Job: "j", Paths: []string{"x", "y/z"}, Next: []string{"w"}},
		{Op: OpOrder, Job: "j", Table: TableName(table), TablePayload: table, Indices: []uint32{1, 0}, NextIndices: []uint32{0}},
		{Op: OpOrder, Job: "j", Table: TableName(table), Indices: []uint32{7}},
		{Op: OpCached, Table: TableName(table), TablePayload: table},
	} {
		want := req
		payload := encodePayload(&req)
		line, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		var b Buffer
		if !b.Add(slices.Concat(line, []byte{'\n'}, payload)) {
			t.Fatalf("%+v: not a whole request", want)
		}
		got, err := b.Request()
		if err != nil {
			t.Fatalf("%+v: %v", want, err)
		}
		if got.Op != want.Op || !slices.Equal(got.Paths, want.Paths) || !slices.Equal(got.Next, want.Next) || !bytes.Equal(got.TablePayload, want.TablePayload) ||
			!slices.Equal(got.Indices, want.Indices) || !slices.Equal(got.NextIndices, want.NextIndices) {
			t.Errorf("sent %+v, read %+v", want, got)
		}
	}
}
