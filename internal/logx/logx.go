// Package logx holds the one logging default of the libraries: a nil
// logger means "say nothing".
package logx

import (
	"io"

	"github.com/sirupsen/logrus"
)

// OrDiscard returns l, or a logger that discards everything when l is nil.
func OrDiscard(l *logrus.Entry) *logrus.Entry {
	if l != nil {
		return l
	}
	d := logrus.New()
	d.SetOutput(io.Discard)
	return logrus.NewEntry(d)
}
