package store

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt keeps two meta pages (pages 0 and 1) and writes transaction N's to
// page N%2. When the newest is damaged, bbolt opens the file on the older
// one without a word: the last committed transaction is gone, and an
// address acknowledged to one machine may be handed to the next. Both are
// checked here before bbolt opens the file (docs/regserver.md, "A damaged
// store").

// The meta page layout of bbolt's file format version 2: a 16-byte page
// header, then magic, version, page size, flags (4 bytes each), the root
// bucket (16), the freelist and high-water page ids and the txid (8 each),
// and an FNV-64a checksum of everything before it.
const (
	metaMagic     = 0xED0CDAED
	metaVersion   = 2
	pageHeader    = 16
	metaTxid      = pageHeader + 48
	metaChecksum  = pageHeader + 56
	metaLen       = metaChecksum + 8
	minPageSize   = 1024
	maxPageSize   = 1 << 24
	metaPageFlags = 0x04
)

// meta is one meta page as read from the file.
type meta struct {
	ok bool
	// valid: what bbolt itself validates (magic, version, checksum; not
	// the page header), so the page bbolt would serve from.
	valid bool
	// missing: the file ends before this page (a zero meta, raw empty).
	missing  bool
	pageSize uint32
	txid     uint64 // as written; garbage when !ok
	raw      []byte
}

func parseMeta(b []byte) meta {
	le := binary.LittleEndian
	m := meta{pageSize: le.Uint32(b[pageHeader+8:]), txid: le.Uint64(b[metaTxid:]), raw: append([]byte(nil), b...)}
	m.valid = le.Uint32(b[pageHeader:]) == metaMagic && le.Uint32(b[pageHeader+4:]) == metaVersion && checksum(b) == le.Uint64(b[metaChecksum:])
	m.ok = le.Uint16(b[8:])&metaPageFlags != 0 && m.valid
	return m
}

func checksum(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b[pageHeader:metaChecksum])
	return h.Sum64()
}

// wasTxid: the damaged page's checksum matches its content with the txid
// set to t, so the damage is in the txid and the page was transaction t.
func (m meta) wasTxid(t uint64) bool {
	if len(m.raw) < metaLen {
		return false
	}
	b := append([]byte(nil), m.raw...)
	binary.LittleEndian.PutUint64(b[metaTxid:], t)
	return checksum(b) == binary.LittleEndian.Uint64(b[metaChecksum:])
}

// older tells a damaged page that held the transaction before good's: its
// txid, unless the damage is in the txid itself (then the checksum says).
func (m meta) older(good meta) bool {
	switch {
	case m.wasTxid(good.txid + 1):
		return false
	case m.wasTxid(good.txid - 1):
		return true
	}
	return m.txid+1 == good.txid
}

// readMetas reads both meta pages; page 1's offset is page 0's page size,
// or, when page 0 is damaged, the first size at which page 1 validates.
func readMetas(f io.ReaderAt) (m0, m1 meta, err error) {
	buf := make([]byte, metaLen)
	if _, err := f.ReadAt(buf, 0); err != nil {
		return m0, m1, err
	}
	m0 = parseMeta(buf)
	sizes := []int64{int64(m0.pageSize)}
	if !m0.ok {
		sizes = sizes[:0]
		for s := int64(minPageSize); s <= maxPageSize; s <<= 1 {
			sizes = append(sizes, s)
		}
	}
	m1.missing = true
	for _, s := range sizes {
		if _, err := f.ReadAt(buf, s); err != nil {
			continue
		}
		if m1 = parseMeta(buf); m1.ok {
			break
		}
	}
	return m0, m1, nil
}

// checkMetas judges the two meta pages of the bbolt file at path. Both
// valid, or both damaged (bbolt then refuses the file itself): nil. The
// older damaged: a warning, the file is served (the next commit rewrites
// that page). The newest damaged, or which one cannot be told: an error
// wrapping ErrDamaged saying what is lost, unless acceptOlder, when it is a
// warning and bbolt serves the older transaction.
func checkMetas(path string, acceptOlder bool) (warning string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	m0, m1, err := readMetas(f)
	if err != nil || m0.ok == m1.ok {
		return "", nil
	}
	if m0.ok && m1.missing {
		// Cut short after page 0: there is no older page to fall back to
		// nor a newest to compare with, and wasTxid has nothing to read.
		size := int64(-1)
		if fi, err := f.Stat(); err == nil {
			size = fi.Size()
		}
		return "", fmt.Errorf("%w: the file is %d bytes and ends before meta page 1 (at byte %d): truncated; the transactions after %d, if any, are lost", ErrDamaged, size, m0.pageSize, m0.txid)
	}
	good, bad, badPage := m0, m1, 1
	if m1.ok {
		good, bad, badPage = m1, m0, 0
	}
	if bad.older(good) {
		return fmt.Sprintf("meta page %d (transaction %d, the older one) is damaged: served from transaction %d, the newest; the next commit rewrites the damaged page", badPage, good.txid-1, good.txid), nil
	}
	lost := fmt.Sprintf("meta page %d, which holds the newest transaction (%d, or its number is damaged too), is damaged: opening the file would fall back to transaction %d and lose the last commit (an address acknowledged to a machine could be handed to another)", badPage, good.txid+1, good.txid)
	if acceptOlder {
		return lost + "; accepted (--accept-older-transaction): serving transaction " + fmt.Sprint(good.txid), nil
	}
	return "", fmt.Errorf("%w: %s", ErrDamaged, lost)
}
