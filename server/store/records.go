package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/nodereg/nodereg/protocol"
)

// op is one record to write (value nil: delete).
type op struct {
	bucket, key, value []byte
}

// takeOps encodes every recorded change, in a fixed order, and forgets
// the records.
func (st *State) takeOps() ([]op, error) {
	var ops []op
	for h := range st.dirtyIn {
		inv, ok := st.Inventories[h]
		if !ok {
			ops = append(ops, op{bucketInventories, []byte(h), nil})
			continue
		}
		b, err := json.Marshal(inv)
		if err != nil {
			return nil, fmt.Errorf("encoding inventory %s: %w", h, err)
		}
		ops = append(ops, op{bucketInventories, []byte(h), b})
	}
	for seq, c := range st.dirtyCl {
		if c == nil {
			ops = append(ops, op{bucketClaims, seqKey(seq), nil})
			continue
		}
		b, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("encoding claim %s: %w", c.Name, err)
		}
		ops = append(ops, op{bucketClaims, seqKey(seq), b})
	}
	for h, b := range st.hw {
		ops = append(ops, op{bucketHardware, []byte(h), b})
	}
	st.resetDirty()
	return ops, nil
}

// apply writes ops in order in one transaction.
func apply(back backend, ops []op) error {
	return back.update(func(tx txn) error {
		for _, o := range ops {
			var err error
			if o.value == nil {
				err = tx.del(o.bucket, o.key)
			} else {
				err = tx.put(o.bucket, o.key, o.value)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// commit writes every recorded change in one transaction (import only;
// Update batches).
func (st *State) commit() error {
	ops, err := st.takeOps()
	if err != nil {
		return err
	}
	return apply(st.back, ops)
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// load reads inventories and claims (not hardware) from the backend and
// builds the indexes from them.
func load(back backend) (*State, error) {
	st := newState(back)
	err := back.forEach(bucketInventories, func(k, v []byte) error {
		var inv Inventory
		if err := json.Unmarshal(v, &inv); err != nil {
			return fmt.Errorf("inventory %q: %w", k, err)
		}
		if inv.Hash != string(k) {
			return fmt.Errorf("inventory under key %q has hash %q", k, inv.Hash)
		}
		st.Inventories[inv.Hash] = &inv
		st.idx.byName[inv.Name] = inv.Hash
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = back.forEach(bucketClaims, func(k, v []byte) error {
		if len(k) != 8 {
			return fmt.Errorf("claim key %x is not a sequence number", k)
		}
		c := &Claim{seq: binary.BigEndian.Uint64(k)}
		if err := json.Unmarshal(v, c); err != nil {
			return fmt.Errorf("claim %d: %w", c.seq, err)
		}
		st.Claims = append(st.Claims, c)
		st.idx.add(c)
		st.nextSeq = max(st.nextSeq, c.seq)
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Claims that found their pool full wait in creation order, also after
	// a reload: a newer claim must not overtake them.
	for _, c := range st.Claims {
		if c.Address == "" && c.Reason == protocol.ReasonPoolExhausted {
			st.Enqueue(c)
		}
	}
	return st, nil
}
