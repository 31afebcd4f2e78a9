package fs

import (
	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/readahead"
)

// MountStats are one mount's figures, as its parts keep them: the
// daemon's metrics read them so, and Wire gives them as the control
// protocol sends them (control.MountStats, whose documentation says what
// each holds).
type MountStats struct {
	Mountpoint, Source                                            string
	Files                                                         int
	Reads, BytesRead, ReadErrors, Lookups, Getattrs, BatchedReads int64
	FastPath                                                      string
	// Reads through the mount's source, by where they came from.
	SourceStats cache.SourceStats
	Jobs        []readahead.JobStats
	// Backend is zero where the backend keeps no count of its requests
	// (backend.StatsReporter).
	Backend backend.RequestStats
}

// Wire returns s as the control protocol sends it.
func (s MountStats) Wire() control.MountStats {
	jobs := make([]control.JobStats, len(s.Jobs)) // never nil: stats lists no jobs as []
	for i, j := range s.Jobs {
		jobs[i] = wireJob(j)
	}
	return control.MountStats{
		Mountpoint: s.Mountpoint, Source: s.Source, Files: s.Files,
		Reads: s.Reads, BytesRead: s.BytesRead, ReadErrors: s.ReadErrors, Lookups: s.Lookups, Getattrs: s.Getattrs, BatchedReads: s.BatchedReads,
		FastPath:    s.FastPath,
		SourceStats: wireSource(s.SourceStats),
		Jobs:        jobs,
		Backend:     wireRequests(s.Backend),
	}
}

func wireSource(s cache.SourceStats) control.SourceStats {
	return control.SourceStats{Hits: s.Hits, Misses: s.Misses, BytesFromCache: s.BytesFromCache, BytesFromBackend: s.BytesFromBackend}
}

// wireJob leaves out what the wire doesn't carry (the stall histogram:
// the daemon's metrics export it).
func wireJob(j readahead.JobStats) control.JobStats {
	return control.JobStats{
		Mount: j.Mount, Name: j.Name, UID: j.UID, Epoch: j.Epoch, Declared: j.Declared, NextDeclared: j.NextDeclared,
		Read: j.Read, Frontier: j.Frontier, Window: j.Window, ReadRate: j.ReadRate,
		TotalReads: j.TotalReads, Prefetched: j.Prefetched, PrefetchHits: j.PrefetchHits, Stalls: j.Stalls,
		HitRate: j.HitRate, StallSeconds: j.StallSeconds, PrefetchEvicted: j.PrefetchEvicted, PrefetchUnseen: j.PrefetchUnseen,
		AdmissionsRefused: j.AdmissionsRefused, EvictedInWindow: j.EvictedInWindow, IdleSeconds: j.IdleSeconds, Pushed: j.Pushed,
	}
}

func wireRequests(s backend.RequestStats) control.RequestStats {
	return control.RequestStats{
		Gets: s.Gets, Hedges: s.Hedges, HedgesWon: s.HedgesWon,
		FirstByteTimeouts: s.FirstByteTimeouts, BodyTimeouts: s.BodyTimeouts, Retries: s.Retries, Throttled: s.Throttled,
		FirstByteP99Millis: s.FirstByteP99Millis, TimeoutMillis: s.TimeoutMillis, HedgeMillis: s.HedgeMillis,
	}
}
