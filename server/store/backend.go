package store

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// txn is one write transaction.
type txn interface {
	put(bucket, key, value []byte) error
	del(bucket, key []byte) error
}

// backend is where committed records live: bbolt, or a map for stores
// without a file.
type backend interface {
	update(fn func(txn) error) error
	forEach(bucket []byte, fn func(k, v []byte) error) error
	get(bucket, key []byte) ([]byte, error)
	close() error
}

// lockTimeout bounds the wait for another process's lock on the file.
const lockTimeout = 2 * time.Second

type boltBackend struct{ db *bolt.DB }

// openBolt opens (or creates) the database and its buckets and checks the
// layout version.
func openBolt(path string, readOnly bool) (*boltBackend, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout, ReadOnly: readOnly})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("opening: the file is locked by another process (a running regserver?)")
	}
	if err != nil {
		return nil, fmt.Errorf("opening: %w", err)
	}
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
		err = db.View(check)
	} else {
		err = db.Update(func(tx *bolt.Tx) error {
			if tx.Bucket(bucketMeta) == nil {
				meta, err := tx.CreateBucket(bucketMeta)
				if err != nil {
					return err
				}
				if err := meta.Put(keyVersion, fmt.Append(nil, FormatVersion)); err != nil {
					return err
				}
			}
			for _, b := range [][]byte{bucketInventories, bucketClaims, bucketHardware} {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			return check(tx)
		})
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return &boltBackend{db}, nil
}

type boltTxn struct{ tx *bolt.Tx }

func (t boltTxn) put(b, k, v []byte) error { return t.tx.Bucket(b).Put(k, v) }
func (t boltTxn) del(b, k []byte) error    { return t.tx.Bucket(b).Delete(k) }

func (b *boltBackend) update(fn func(txn) error) error {
	return b.db.Update(func(tx *bolt.Tx) error { return fn(boltTxn{tx}) })
}

func (b *boltBackend) forEach(bucket []byte, fn func(k, v []byte) error) error {
	return b.db.View(func(tx *bolt.Tx) error { return tx.Bucket(bucket).ForEach(fn) })
}

func (b *boltBackend) get(bucket, key []byte) ([]byte, error) {
	var out []byte
	err := b.db.View(func(tx *bolt.Tx) error {
		// Values are valid only inside the transaction.
		out = slices.Clone(tx.Bucket(bucket).Get(key))
		return nil
	})
	return out, err
}

func (b *boltBackend) close() error { return b.db.Close() }

// memBackend keeps committed records in maps; a transaction applies only
// when it succeeds as a whole.
type memBackend struct {
	mu      sync.RWMutex
	buckets map[string]map[string][]byte
}

func newMemBackend() *memBackend {
	m := &memBackend{buckets: map[string]map[string][]byte{}}
	for _, b := range [][]byte{bucketInventories, bucketClaims, bucketHardware} {
		m.buckets[string(b)] = map[string][]byte{}
	}
	return m
}

type memOp struct {
	bucket, key string
	value       []byte // nil: delete
}

type memTxn struct{ ops []memOp }

func (t *memTxn) put(b, k, v []byte) error {
	t.ops = append(t.ops, memOp{string(b), string(k), slices.Clone(v)})
	return nil
}

func (t *memTxn) del(b, k []byte) error {
	t.ops = append(t.ops, memOp{string(b), string(k), nil})
	return nil
}

func (m *memBackend) update(fn func(txn) error) error {
	t := &memTxn{}
	if err := fn(t); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, op := range t.ops {
		if op.value == nil {
			delete(m.buckets[op.bucket], op.key)
		} else {
			m.buckets[op.bucket][op.key] = op.value
		}
	}
	return nil
}

func (m *memBackend) forEach(bucket []byte, fn func(k, v []byte) error) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	b := m.buckets[string(bucket)]
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if err := fn([]byte(k), b[k]); err != nil {
			return err
		}
	}
	return nil
}

func (m *memBackend) get(bucket, key []byte) ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Clone(m.buckets[string(bucket)][string(key)]), nil
}

func (m *memBackend) close() error { return nil }
