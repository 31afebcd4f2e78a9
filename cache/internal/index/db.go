package index

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/dsmount/dsmount/cache/internal/record"
)

// MemTableSize is the index's memtable size.
const MemTableSize = 8 << 20

// FlushRoom is the free space one write to the index may take, or closing
// it: a write that fills the memtable rotates it, creating a new log of
// twice the memtable's size (badger sizes its .mem files so, sparse, and
// writes into it in the same call, before any Prepare could allocate it),
// and flushes the old one to a table of up to the memtable's size; a value
// log rotation adds 4 MiB. 4 memtables cover them all.
const FlushRoom = 4 * MemTableSize

// DB is an open index.
type DB struct {
	db    *badger.DB
	log   *slog.Logger
	files *Files
}

// Open opens (creating if need be) the index in dir and checks its
// format; cacheDir names the cache in the error for another format.
// noSpace hears of a filesystem too full for an index write (see Files).
func Open(dir, cacheDir string, log *slog.Logger, noSpace func(error)) (*DB, error) {
	bopts := badger.DefaultOptions(dir).
		// Badger logs each memtable in a file of twice its size, which
		// Files allocates on disk. 8 MiB holds the records of some
		// 50,000 cached files, and is the least that takes a 1 MiB value
		// (a listing page) in one batch.
		WithMemTableSize(MemTableSize).
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(4).
		WithCompression(options.None).
		WithBlockCacheSize(0).
		WithIndexCacheSize(32 << 20).
		// The value log holds only listing pages of 1 MiB or more; badger
		// maps twice this size, and Files allocates it all on disk.
		WithValueLogFileSize(4 << 20).
		WithLogger(badgerLogger{log})
	db, err := badger.Open(bopts)
	if err != nil {
		return nil, fmt.Errorf("open cache index: %w", err)
	}
	x := &DB{db: db, log: log, files: newFiles(dir, noSpace)}
	if err := x.checkFormat(cacheDir); err != nil {
		db.Close()
		return nil, err
	}
	return x, nil
}

func (x *DB) checkFormat(cacheDir string) error {
	return x.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(record.FormatKey))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return txn.Set([]byte(record.FormatKey), []byte(record.FormatVersion))
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if string(v) != record.FormatVersion {
				return fmt.Errorf("cache dir %s has format %q, this dsmount uses %q: remove it or pick another --cache-dir", cacheDir, v, record.FormatVersion)
			}
			return nil
		})
	})
}

// Prepare reports whether the index may be written to now (see Files).
// Writers ask it before each write.
func (x *DB) Prepare() bool { return x.files.Prepare() }

// Close closes the index, flushing its memtable into a new table. With
// no room for that flush (see Files) it leaves the index open instead and
// reports closed false: everything it was given is in its log already,
// which it replays at the next start, and a flush with no room would
// fault. Its goroutines, maps and directory lock then stay until the
// process exits.
func (x *DB) Close() (closed bool, err error) {
	if !x.files.Prepare() {
		return false, nil
	}
	return true, x.db.Close()
}

type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) {
	b.l.Error("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}
func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}
func (b badgerLogger) Infof(string, ...any)  {}
func (b badgerLogger) Debugf(string, ...any) {}
