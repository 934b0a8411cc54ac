package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// unit says how a row's value is printed and compared with its budget.
type unit int

const (
	unitDuration unit = iota // value in nanoseconds
	unitCount
	unitBytes
	unitRate  // per second
	unitRatio // a plain number, two decimals
)

// row is one line of the table. A row without a budget is information only.
type row struct {
	name   string
	unit   unit
	value  float64
	budget float64 // upper bound; NaN: no budget
	note   string
	err    error
}

func noBudget() float64 { return math.NaN() }

func (r row) hasBudget() bool { return !math.IsNaN(r.budget) }

// verdict is PASS/OVER against the budget, "-" without one, ERROR when the
// measurement could not be made.
func (r row) verdict() string {
	switch {
	case r.err != nil:
		return "ERROR"
	case !r.hasBudget():
		return "-"
	case r.value <= r.budget:
		return "PASS"
	default:
		return "OVER"
	}
}

func format(u unit, v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	switch u {
	case unitDuration:
		d := time.Duration(v)
		switch {
		case d >= time.Second:
			return fmt.Sprintf("%.2f s", d.Seconds())
		case d >= time.Millisecond:
			return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
		default:
			return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
		}
	case unitBytes:
		return fmt.Sprintf("%.1f MB", v/1e6)
	case unitRate:
		return fmt.Sprintf("%.0f /s", v)
	case unitRatio:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

func budgetText(r row) string {
	if !r.hasBudget() {
		return "-"
	}
	return "≤ " + format(r.unit, r.budget)
}

// printTable writes the one table of the program.
func printTable(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tmedian\tbudget\tresult\tnote")
	fmt.Fprintln(tw, "-------\t------\t------\t------\t----")
	for _, r := range rows {
		val := format(r.unit, r.value)
		note := r.note
		if r.err != nil {
			val = "-"
			note = r.err.Error()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.name, val, budgetText(r), r.verdict(), oneLine(note))
	}
	tw.Flush()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// median of durations; 0 for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// medianFloat of values; NaN for none.
func medianFloat(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percentile by the nearest-rank method: the smallest value with at least
// p percent of the values at or below it.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = max(rank, 1)
	return s[rank-1]
}
