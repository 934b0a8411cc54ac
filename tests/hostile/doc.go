// Package hostile plays a registration server that attacks the node: replies
// built to exhaust memory, local paths and devices in the config, a token
// echoed back, an explicit network config in the seed PR's shape. Each
// attack of docs/reliability.md's "Hostile server" table is a case here; the cases use real websockets on
// loopback and the real agent packages. Only tests import it.
package hostile
