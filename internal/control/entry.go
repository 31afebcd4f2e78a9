package control

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// EntryName is the hidden entry at a mount's root through which clients
// (dsmount warm, order and stats, the Python package) talk to the daemon.
// A session is a new entry created as EntryName + "." + anything unique.
const EntryName = ".dsmount-control"

// Ops of a Request.
const (
	OpWarm  = "warm"
	OpOrder = "order"
	OpStats = "stats"
	// OpCached asks which files of a path table are wholly in the node's
	// cache (CachedResult).
	OpCached = "cached"
)

// Types of an Event.
const (
	EventPlan     = "plan"
	EventProgress = "progress"
	EventResult   = "result"
	EventError    = "error"
)

// Codes of an error Event that a client acts on.
const (
	// CodeUnknownTable: the declaration named a path table the daemon
	// does not have (it was never sent, or was dropped, or the daemon
	// restarted): send the table again.
	CodeUnknownTable = "unknown_table"
	// CodeUnsupportedVersion: the request asked for a protocol version
	// newer than the daemon's.
	CodeUnsupportedVersion = "unsupported_version"
)

// Request is one control request: a JSON line, then the payload it
// announces.
type Request struct {
	// Version is the protocol version the client speaks; 0 means 1.
	Version int      `json:"version,omitempty"`
	Op      string   `json:"op"`              // OpWarm, OpOrder, OpStats or OpCached
	Paths   []string `json:"paths,omitempty"` // warm: files or directories; order: the epoch's files in order; relative to the mount root
	Job     string   `json:"job,omitempty"`   // order: the job's name, unique on the mount
	Epoch   int      `json:"epoch,omitempty"` // order: the epoch Paths is the order of
	Next    []string `json:"next,omitempty"`  // order: the next epoch's order, when known
	End     bool     `json:"end,omitempty"`   // order: forget the job (it is done)
	// PID (order) names the training process whose reads (its own and its
	// descendants') are the job's; default: the process writing the
	// request. Anonymous: no owner; reads are matched by file alone.
	PID       int  `json:"pid,omitempty"`
	Anonymous bool `json:"anonymous,omitempty"`
	Parallel  int  `json:"parallel,omitempty"` // warm: chunk fetches in flight
	Check     bool `json:"check,omitempty"`    // warm: report the cached fraction, fetch nothing
	// PathsBytes and NextBytes (order) announce Paths and Next as a
	// payload after the request line instead (NUL-ended paths).
	PathsBytes int `json:"paths_bytes,omitempty"`
	NextBytes  int `json:"next_bytes,omitempty"`
	// Table (order, cached) names the path table that the indices index
	// (see TableName); TableBytes announces the table itself in the
	// payload (its paths, NUL-ended), after Paths and Next; IndicesBytes and
	// NextIndicesBytes the epoch's and the next's indices into it, as
	// little-endian uint32s, after the table.
	Table            string `json:"table,omitempty"`
	TableBytes       int    `json:"table_bytes,omitempty"`
	IndicesBytes     int    `json:"indices_bytes,omitempty"`
	NextIndicesBytes int    `json:"next_indices_bytes,omitempty"`
	// RangesBytes and NextRangesBytes (order, version 3) announce the
	// epoch's and the next epoch's samples as byte ranges of Paths (the
	// files, then, not the samples): RangeSize bytes each, after the
	// indices. A declaration of ranges names its files by Paths alone.
	RangesBytes     int `json:"ranges_bytes,omitempty"`
	NextRangesBytes int `json:"next_ranges_bytes,omitempty"`

	// Decoded from the payload by Buffer; never sent as JSON.
	TablePayload         []byte   `json:"-"` // the table sent, if any
	Indices, NextIndices []uint32 `json:"-"`
	Ranges, NextRanges   []Range  `json:"-"`
}

// Range is one declared sample that is a byte range of a file: Length
// bytes of Paths[File] from Offset. On the wire (RangeSize bytes, little
// endian): Offset uint64, Length uint32, File uint32.
type Range struct {
	Offset int64
	Length uint32
	File   uint32
}

// RangeSize is the bytes of one Range in a payload.
const RangeSize = 16

// RangesVersion is the first protocol version whose order requests may
// carry ranges.
const RangesVersion = 3

// Event is one line of a control response.
type Event struct {
	Type  string `json:"type"` // EventPlan, EventProgress, EventResult or EventError
	Error string `json:"error,omitempty"`
	// Code names an error a client acts on (CodeUnknownTable, ...).
	Code   string          `json:"code,omitempty"`
	Warm   *WarmProgress   `json:"warm,omitempty"`
	Plan   *WarmPlan       `json:"plan,omitempty"`
	Order  *OrderResult    `json:"order,omitempty"`
	Cached *CachedResult   `json:"cached,omitempty"`
	Stats  json.RawMessage `json:"stats,omitempty"` // a StatsReport
}

// WarmPlan is what a warm request covers, reported before any fetch.
type WarmPlan struct {
	Files        int      `json:"files"`
	Bytes        int64    `json:"bytes"`
	BytesCached  int64    `json:"bytes_cached"`
	FilesCached  int      `json:"files_cached"`
	CacheFree    int64    `json:"cache_free"` // -1: unlimited
	Fits         bool     `json:"fits"`
	NotFound     int      `json:"not_found"`
	NotFoundList []string `json:"not_found_examples,omitempty"`
}

// WarmProgress is a warm's running (and, in the result, final) count.
type WarmProgress struct {
	Files               int     `json:"files"`
	FilesDone           int64   `json:"files_done"`
	Bytes               int64   `json:"bytes"`
	BytesDone           int64   `json:"bytes_done"`
	ChunksFetched       int64   `json:"chunks_fetched"`
	ChunksAlreadyCached int64   `json:"chunks_already_cached"`
	ChunksNotCached     int64   `json:"chunks_not_cached"` // left out: cache full, or not kept by the policy
	BytesFetched        int64   `json:"bytes_fetched"`
	Errors              int64   `json:"errors"`
	FirstError          string  `json:"first_error,omitempty"`
	Seconds             float64 `json:"seconds"`
	CacheFull           bool    `json:"cache_full"`
	Interrupted         bool    `json:"interrupted"`
}

// OrderResult answers an "order" request: what the declaration kept.
type OrderResult struct {
	Job          string `json:"job"`
	Epoch        int    `json:"epoch"`
	Declared     int    `json:"declared"`      // files of the current epoch's order kept
	NextDeclared int    `json:"next_declared"` // files of the next epoch's order kept
	Duplicates   int    `json:"duplicates"`    // repeats left out (a file is read once per epoch)
	Skipped      int    `json:"skipped"`       // paths that are not files of the mount, left out
	// SkippedExamples names the first few skipped paths and why.
	SkippedExamples []string `json:"skipped_examples"`
	Ended           bool     `json:"ended,omitempty"` // an "end" request forgot the job
}

// CachedResult answers a "cached" request: which files of the table are
// wholly in this node's cache now. Bitmap holds one bit per table path,
// path i in byte i/8 under mask 1<<(i%8) (JSON: base64); a path that is
// not a file of the mount is never set. A node's mounts share one cache,
// so any mount of the dataset answers for the node.
type CachedResult struct {
	Files  int    `json:"files"`  // the table's paths
	Cached int    `json:"cached"` // bits set
	Bitmap []byte `json:"bitmap"`
}

// Has reports whether path i of the table is cached.
func (r *CachedResult) Has(i int) bool {
	return i >= 0 && i < r.Files && i/8 < len(r.Bitmap) && r.Bitmap[i/8]&(1<<(i%8)) != 0
}

// TableName is the name of the path table whose payload is b: the first
// 16 bytes of its SHA-256, in hex.
func TableName(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}
