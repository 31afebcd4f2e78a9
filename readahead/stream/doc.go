// Package stream reads ahead of sequential readers of large files: a
// Detector per file bigger than a chunk, and a Budget the Detectors of one
// cache share. It knows nothing of declared orders (package readahead) or
// of the cache: a Detector fetches through the Fetcher it is given.
//
// # Detecting a stream
//
// A Detector detects sequential reading (from the first read at offset 0,
// or two reads in a row) and keeps the chunks past the reader's fetched
// or in flight, through a Fetcher the file system binds to
// cache.Source.PrefetchWatched. Its window is over bytes: at most
// WindowBytes asked for and not yet arrived, at most AheadBytes past the
// chunk being read. It is topped up on reads and as each fetch reports
// bytes arrived (backend.WithProgress), so new GETs go out while earlier
// ones are still delivering rather than in waves behind the reader.
//
// # Sharing the budget
//
// The Detectors of one cache share a Budget: each active stream's bounds
// are an equal share of budgets for the cache's streams together (128 MiB
// ahead, 64 MiB to arrive; a lone stream keeps its full window), because
// the chunks they fetch ahead wait in the cache's one staging area and the
// store gives no more to dozens of GETs than to sixteen.
//
// # Locking
//
// A Detector's own mutex guards its window; it is not held while calling
// its Fetcher, and its progress callbacks take it briefly. A Budget's
// mutex is taken with a Detector's held, never the other way.
package stream
