// Package store is `bench store`: it measures what the benchmarks' local
// store (MinIO behind toxiproxy) costs in CPU per GET, depending on how its
// client asks, with no filesystem involved. On a 2-core machine the store
// shares the cores with dsmount, so every CPU second it spends is one the
// client can't have; this tells the store's share apart from the client's.
//
// Each round runs, over the same --files small files in a shuffled order:
//
//   - sdk: ranged GetObject calls through the AWS SDK, --gets in flight
//     (bench order's ceiling);
//   - raw: the same GETs through dsmount's S3 backend (its ReadAt, which
//     signs plain HTTP requests and sends If-Match), --gets in flight, flat
//     out;
//   - raw, paced: the same, but started at --pace times raw's rate of the
//     same round, as a loader consuming at that rate would ask (at most
//     --gets in flight);
//   - raw, busy client: raw with one goroutine spinning beside it, a
//     client that keeps one core busy.
//
// For each it reports files/s, and MinIO's and toxiproxy's user and system
// CPU seconds, per 10,000 GETs and against sdk's of the same round. Usage:
// go run ./bench store [flags]; needs the MinIO and toxiproxy binaries
// that test/run.sh installs.
package store
