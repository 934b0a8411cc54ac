package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// lockTimeout bounds the wait for another process's lock on the file (a
// variable so the test of the refusal need not wait 2 s for it).
var lockTimeout = 2 * time.Second

// Memory map bounds (docs/regserver.md, The store): the map starts large
// enough for a lab's store, so it is not remapped under load, and the
// file grows in small steps instead of bbolt's 16 MiB.
const (
	initialMmapSize = 8 << 20
	allocSize       = 1 << 20
)

// ErrDamaged marks a store whose file does not read back as bbolt wrote
// it: truncated, overwritten, a flipped bit. Errors wrapping it name what
// could not be read.
var ErrDamaged = errors.New("the store file is damaged")

// guard runs fn, turning a panic of the storage layer, and a fault on a
// damaged memory-mapped page (SIGSEGV, SIGBUS), into an error wrapping
// ErrDamaged: a damaged page fails the request that met it, never the
// process.
func guard(what string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s: %v", ErrDamaged, what, r)
		}
	}()
	return fn()
}

type boltBackend struct{ db *bolt.DB }

// openBolt opens (or creates) the database and its buckets, checks the
// layout version, and, for an existing file, its consistency (verify).
func openBolt(path string, readOnly bool) (*boltBackend, error) {
	var db *bolt.DB
	err := guard("bbolt failed opening it", func() error {
		var err error
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout, ReadOnly: readOnly, InitialMmapSize: initialMmapSize})
		return err
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("opening: the file is locked by another process (a running regserver?)")
	}
	// Whatever else bbolt refuses an existing file for (bad meta pages, a
	// file shorter than its pages) is damage, not a lack of permission.
	if err != nil && !errors.Is(err, ErrDamaged) && !errors.Is(err, fs.ErrPermission) && !errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("%w: bbolt refused it: %v", ErrDamaged, err)
	}
	if errors.Is(err, ErrDamaged) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("opening: %w", err)
	}
	db.AllocSize = allocSize
	b := &boltBackend{db}
	if err := b.prepare(readOnly); err != nil {
		_ = guard("closing", db.Close)
		return nil, err
	}
	return b, nil
}

// prepare creates the buckets of a new file and checks an existing one.
func (b *boltBackend) prepare(readOnly bool) error {
	check := func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return errors.New("no meta bucket: not a regserver store")
		}
		if v := string(meta.Get(keyVersion)); v != fmt.Sprint(FormatVersion) {
			return fmt.Errorf("layout version %q, this server reads %d", v, FormatVersion)
		}
		return nil
	}
	if readOnly {
		return guard("checking", func() error { return b.db.View(check) })
	}
	return guard("checking", func() error {
		return b.db.Update(func(tx *bolt.Tx) error {
			if tx.Bucket(bucketMeta) == nil {
				meta, err := tx.CreateBucket(bucketMeta)
				if err != nil {
					return err
				}
				if err := meta.Put(keyVersion, fmt.Append(nil, FormatVersion)); err != nil {
					return err
				}
			}
			for _, name := range [][]byte{bucketInventories, bucketClaims, bucketHardware} {
				if _, err := tx.CreateBucketIfNotExists(name); err != nil {
					return err
				}
			}
			return check(tx)
		})
	})
}

type boltTxn struct{ tx *bolt.Tx }

func (t boltTxn) put(b, k, v []byte) error { return t.tx.Bucket(b).Put(k, v) }
func (t boltTxn) del(b, k []byte) error    { return t.tx.Bucket(b).Delete(k) }

func (b *boltBackend) update(fn func(txn) error) error {
	return guard("writing", func() error {
		return b.db.Update(func(tx *bolt.Tx) error { return fn(boltTxn{tx}) })
	})
}

func (b *boltBackend) forEach(bucket []byte, fn func(k, v []byte) error) error {
	return guard("reading "+string(bucket), func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			bk := tx.Bucket(bucket)
			if bk == nil {
				return fmt.Errorf("%w: bucket %s is missing", ErrDamaged, bucket)
			}
			return bk.ForEach(fn)
		})
	})
}

func (b *boltBackend) get(bucket, key []byte) ([]byte, error) {
	var out []byte
	err := guard("reading "+string(bucket)+" "+string(key), func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			bk := tx.Bucket(bucket)
			if bk == nil {
				return fmt.Errorf("%w: bucket %s is missing", ErrDamaged, bucket)
			}
			// Values are valid only inside the transaction.
			out = slices.Clone(bk.Get(key))
			return nil
		})
	})
	return out, err
}

func (b *boltBackend) close() error { return guard("closing", b.db.Close) }

// Consistency check at start (docs/regserver.md, The store): bounded in
// time, so a large store still starts.
const (
	verifyBudget    = 10 * time.Second
	verifyMaxErrors = 5
)

// verify reads every page the file's tree reaches (every key and value of
// every bucket), compares the size the file must have with the size it
// has, then runs bbolt's own Tx.Check on the pages the walk proved
// readable. It returns an error wrapping ErrDamaged, or nil; partial is
// true when the time budget ran out first.
func (b *boltBackend) verify(path string) (partial bool, err error) {
	deadline := time.Now().Add(verifyBudget)
	err = guard("checking consistency", func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			if fi, err := os.Stat(path); err == nil && tx.Size() > fi.Size() {
				return fmt.Errorf("%w: the file is %d bytes, its pages need %d (truncated?)", ErrDamaged, fi.Size(), tx.Size())
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			buckets, err := checkPages(f, b.db.Info().PageSize, uint64(tx.ID()))
			if err == nil {
				err = firstProblem(buckets)
			}
			if err != nil {
				return err
			}
			var walk func(bk *bolt.Bucket) error
			n := 0
			walk = func(bk *bolt.Bucket) error {
				return bk.ForEach(func(k, v []byte) error {
					if n++; n%1024 == 0 && time.Now().After(deadline) {
						partial = true
						return errStop
					}
					if v == nil {
						if child := bk.Bucket(k); child != nil {
							return walk(child)
						}
					}
					return nil
				})
			}
			err = tx.ForEach(func(name []byte, bk *bolt.Bucket) error { return walk(bk) })
			if err != nil || partial {
				return err
			}
			var problems []error
			for e := range tx.Check() {
				if len(problems) < verifyMaxErrors {
					problems = append(problems, e)
				}
			}
			if len(problems) > 0 {
				return fmt.Errorf("%w: %w", ErrDamaged, errors.Join(problems...))
			}
			return nil
		})
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return partial, err
}

var errStop = errors.New("stop")
