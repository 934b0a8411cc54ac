package store

import (
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
)

// bbolt asserts on its pages instead of returning errors, and its Tx.Check
// runs in a goroutine of its own, where such a panic cannot be recovered
// and ends the process; a page whose overflow count is damaged makes it
// loop for billions of pages, a page that points back at its parent makes
// a cursor descend forever. checkPages reads, from the file and before
// bbolt walks it, every page header and element that bbolt trusts: the
// meta pages, the served transaction's freelist and every page of every
// bucket's tree. What it refuses is damage (ErrDamaged).

// bbolt's page layout (file format version 2): a 16-byte header (id,
// flags, element count, overflow count), then 16-byte elements.
const (
	pageFlagsOff     = 8
	pageCountOff     = 10
	pageOverflowOff  = 12
	elemSize         = 16
	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	freelistPageFlag = 0x10
	bucketLeafFlag   = 0x01
	bucketHeader     = 16 // a bucket's value: root page id, sequence
	metaRoot         = pageHeader + 16
	metaFreelist     = pageHeader + 32
	metaHighWater    = pageHeader + 40
	noFreelist       = ^uint64(0)
)

// pageReader reads pages of one transaction: ids below high.
type pageReader struct {
	f        io.ReaderAt
	pageSize int
	high     uint64
	seen     map[uint64]bool
	// buckets is what the check found in each top-level bucket's tree
	// (nil: sound), so that an export can leave out only what is damaged.
	buckets map[string]error
}

// page reads page id and its overflow pages after checking the header:
// the id it names, its type among want, its span inside high.
func (r *pageReader) page(id uint64, want ...uint16) ([]byte, error) {
	le := binary.LittleEndian
	if id >= r.high {
		return nil, fmt.Errorf("%w: page %d is past the high-water mark %d", ErrDamaged, id, r.high)
	}
	hdr := make([]byte, pageHeader)
	if _, err := r.f.ReadAt(hdr, int64(id)*int64(r.pageSize)); err != nil {
		return nil, fmt.Errorf("%w: page %d cannot be read: %v", ErrDamaged, id, err)
	}
	gotID, flags, overflow := le.Uint64(hdr), le.Uint16(hdr[pageFlagsOff:]), uint64(le.Uint32(hdr[pageOverflowOff:]))
	typeOK := false
	for _, w := range want {
		typeOK = typeOK || flags == w
	}
	if gotID != id || !typeOK || id+overflow >= r.high {
		return nil, fmt.Errorf("%w: page %d's header says page %d, flags %#x, %d overflow pages (high-water mark %d)", ErrDamaged, id, gotID, flags, overflow, r.high)
	}
	for i := id; i <= id+overflow; i++ {
		if r.seen[i] {
			return nil, fmt.Errorf("%w: page %d is reached twice", ErrDamaged, i)
		}
		r.seen[i] = true
	}
	b := make([]byte, (overflow+1)*uint64(r.pageSize))
	if _, err := r.f.ReadAt(b, int64(id)*int64(r.pageSize)); err != nil {
		return nil, fmt.Errorf("%w: page %d cannot be read: %v", ErrDamaged, id, err)
	}
	return b, nil
}

// tree checks the tree rooted at page id, depth levels deep at most.
// top: the tree is the root bucket's, whose bucket entries are the
// top-level buckets (their findings go to r.buckets).
func (r *pageReader) tree(id uint64, depth int, top bool) error {
	if depth > 64 {
		return fmt.Errorf("%w: the tree at page %d is deeper than 64 levels", ErrDamaged, id)
	}
	b, err := r.page(id, branchPageFlag, leafPageFlag)
	if err != nil {
		return err
	}
	return r.elements(b, id, depth, top)
}

// elements checks the elements of the branch or leaf page b (page id, or
// an inline bucket's page in id's leaf): each inside b, each child and
// bucket checked in turn.
func (r *pageReader) elements(b []byte, id uint64, depth int, top bool) error {
	le := binary.LittleEndian
	flags, count := le.Uint16(b[pageFlagsOff:]), int(le.Uint16(b[pageCountOff:]))
	if pageHeader+count*elemSize > len(b) {
		return fmt.Errorf("%w: page %d holds %d elements, more than fit", ErrDamaged, id, count)
	}
	for i := range count {
		e := pageHeader + i*elemSize
		el := b[e : e+elemSize]
		if flags == branchPageFlag {
			pos, ksize := uint64(le.Uint32(el)), uint64(le.Uint32(el[4:]))
			if uint64(e)+pos+ksize > uint64(len(b)) {
				return fmt.Errorf("%w: page %d: element %d lies outside the page", ErrDamaged, id, i)
			}
			if err := r.tree(le.Uint64(el[8:]), depth+1, top); err != nil {
				return err
			}
			continue
		}
		eflags, pos, ksize, vsize := le.Uint32(el), uint64(le.Uint32(el[4:])), uint64(le.Uint32(el[8:])), uint64(le.Uint32(el[12:]))
		end := uint64(e) + pos + ksize + vsize
		if end > uint64(len(b)) {
			return fmt.Errorf("%w: page %d: element %d lies outside the page", ErrDamaged, id, i)
		}
		if eflags&bucketLeafFlag == 0 {
			continue
		}
		err := r.bucket(b[uint64(e)+pos+ksize:end], id, i, depth)
		if top {
			r.buckets[string(b[uint64(e)+pos:uint64(e)+pos+ksize])] = err
		} else if err != nil {
			return err
		}
	}
	return nil
}

// bucket checks the bucket whose value v is element i of page id.
func (r *pageReader) bucket(v []byte, id uint64, i, depth int) error {
	le := binary.LittleEndian
	if len(v) < bucketHeader {
		return fmt.Errorf("%w: page %d: bucket %d is %d bytes, shorter than a bucket header", ErrDamaged, id, i, len(v))
	}
	if root := le.Uint64(v); root != 0 {
		return r.tree(root, depth+1, false)
	}
	// An inline bucket: its leaf page follows the header in the value.
	inline := v[bucketHeader:]
	if len(inline) < pageHeader || le.Uint16(inline[pageFlagsOff:]) != leafPageFlag {
		return fmt.Errorf("%w: page %d: inline bucket %d is not a leaf page", ErrDamaged, id, i)
	}
	if depth > 64 {
		return fmt.Errorf("%w: the buckets at page %d nest deeper than 64 levels", ErrDamaged, id)
	}
	return r.elements(inline, id, depth+1, false)
}

// checkPages checks the pages of the transaction txid of the bbolt file f
// (see above): what bbolt needs to open and walk it (the meta pages, the
// freelist, the root bucket's tree: err), and each top-level bucket's
// tree (buckets, by name: nil when sound).
func checkPages(f io.ReaderAt, pageSize int, txid uint64) (buckets map[string]error, err error) {
	le := binary.LittleEndian
	if pageSize < minPageSize || pageSize > maxPageSize {
		return nil, fmt.Errorf("%w: a page size of %d bytes", ErrDamaged, pageSize)
	}
	r := &pageReader{f: f, pageSize: pageSize, high: 2, seen: map[uint64]bool{}, buckets: map[string]error{}}
	var served []byte
	for id := range uint64(2) {
		b, err := r.page(id, metaPageFlags)
		if err != nil {
			return nil, err
		}
		if m := parseMeta(b[:metaLen]); m.ok && m.txid == txid {
			served = b[:metaLen]
		}
	}
	if served == nil {
		return nil, fmt.Errorf("%w: neither meta page holds the served transaction %d", ErrDamaged, txid)
	}
	r.high = le.Uint64(served[metaHighWater:])
	if fl := le.Uint64(served[metaFreelist:]); fl != noFreelist {
		if _, err := r.page(fl, freelistPageFlag); err != nil {
			return nil, fmt.Errorf("the freelist: %w", err)
		}
	}
	if err := r.tree(le.Uint64(served[metaRoot:]), 0, true); err != nil {
		return nil, err
	}
	return r.buckets, nil
}

// firstProblem is the first damaged bucket's finding, by name, or nil.
func firstProblem(buckets map[string]error) error {
	names := slices.Sorted(maps.Keys(buckets))
	for _, n := range names {
		if err := buckets[n]; err != nil {
			return fmt.Errorf("bucket %s: %w", n, err)
		}
	}
	return nil
}

// checkFile is checkPages on the file at path before bbolt opens it
// (bbolt's own open and first transaction walk the root bucket's tree
// already), for the transaction bbolt will serve: the newer of the meta
// pages that pass bbolt's own validation (magic, version, checksum). With
// neither valid it says nothing: bbolt refuses such a file itself.
func checkFile(path string) (buckets map[string]error, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m0, m1, err := readMetas(f)
	if err != nil {
		return nil, nil
	}
	served := m0
	if !m0.valid || (m1.valid && m1.txid > m0.txid) {
		served = m1
	}
	if !served.valid {
		return nil, nil
	}
	return checkPages(f, int(served.pageSize), served.txid)
}
