package testenv

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dsmount/dsmount/internal/control"
)

// TestDecodeStatsWantsEveryKey: `dsmount stats --json` decodes into
// control.StatsReport, and a key the report lacks, an embedded struct's
// included (a mount's "hits" are control.SourceStats's), is an error.
func TestDecodeStatsWantsEveryKey(t *testing.T) {
	b, err := json.Marshal(control.StatsReport{DaemonPid: 7, Mount: control.MountStats{Jobs: []control.JobStats{}},
		Mounts: []control.MountStats{{Mountpoint: "/mnt/a", Jobs: []control.JobStats{{Name: "j"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var s control.StatsReport
	if err := DecodeJSONObject(string(b), &s); err != nil || s.DaemonPid != 7 {
		t.Fatalf("%v (pid %d)", err, s.DaemonPid)
	}
	if j, ok := Job(s.Mounts[0], "j"); !ok || j.Name != "j" {
		t.Errorf("Job: %+v, %v", j, ok)
	}
	if m, ok := MountByPoint(s, "/mnt/a"); !ok || m.Mountpoint != "/mnt/a" {
		t.Errorf("MountByPoint: %+v, %v", m, ok)
	}
	lacking := strings.Replace(string(b), `"hits":0,`, "", 1)
	if err := DecodeJSONObject(lacking, &s); err == nil || !strings.Contains(err.Error(), `"mount.hits"`) {
		t.Errorf("a report without the mount's hits: %v", err)
	}
}
