package store

import (
	"maps"
	"slices"
	"sync"
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
