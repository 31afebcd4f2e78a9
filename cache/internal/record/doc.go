// Package record owns what the cache writes into its index, byte for byte:
// the identity of an object version (ID, Meta), the key layout, the codecs
// of object, chunk and listing records, and the check blocks whose CRC32Cs
// a chunk record carries. It does no I/O: package index stores these
// bytes, and the cache decides what they mean.
//
// # Keys
//
//	o<id>                     → Object
//	c<id><idx be32>           → Chunk
//	l<source>\0m              → ListingMeta
//	l<source>\0p<gen><page>   → zstd(entries) (EncodeEntries)
//	f                         → FormatVersion
//
// # Invariants
//
//   - Nothing read back is trusted: every decoder checks lengths against
//     what it holds and returns ErrCorrupt (wrapped) rather than a value
//     that no encoder could have written (a negative size, cached bytes
//     beyond the size, a slot offset off its alignment). Fuzz tests feed
//     each decoder arbitrary bytes and check that what it accepts encodes
//     back to the same value.
//   - An ID hashes every field of Meta: a changed object (size, version)
//     or another chunk size is another ID, so old and new bytes never mix.
//
// # Locking
//
// None: values are immutable once built, except Meta's memoised ID, which
// NewMeta sets before the Meta is shared.
package record
