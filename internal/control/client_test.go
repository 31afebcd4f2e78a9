package control

import (
	"errors"
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
