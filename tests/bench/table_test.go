package main

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestMedianAndPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	if got := median(ms(9, 1, 5)); got != 5*time.Millisecond {
		t.Errorf("median of 9,1,5 = %v", got)
	}
	if got := median(ms(4, 1, 3, 2)); got != 2500*time.Microsecond {
		t.Errorf("median of 4,1,3,2 = %v", got)
	}
	if got := median(nil); got != 0 {
		t.Errorf("median of nothing = %v", got)
	}
	if got := medianFloat([]float64{3, 1, 2}); got != 2 {
		t.Errorf("medianFloat = %v", got)
	}
	if got := medianFloat(nil); !math.IsNaN(got) {
		t.Errorf("medianFloat of nothing = %v, want NaN", got)
	}
	var hundred []int
	for i := 100; i >= 1; i-- {
		hundred = append(hundred, i)
	}
	// Nearest rank: p99 of 1..100 is 99, p100 is the maximum, p1 the minimum.
	for p, want := range map[float64]int{99: 99, 100: 100, 1: 1, 50: 50} {
		if got := percentile(ms(hundred...), p); got != time.Duration(want)*time.Millisecond {
			t.Errorf("p%v of 1..100 = %v, want %dms", p, got, want)
		}
	}
	if got := percentile(ms(7), 99); got != 7*time.Millisecond {
		t.Errorf("p99 of one value = %v", got)
	}
}

func TestVerdicts(t *testing.T) {
	cases := []struct {
		r    row
		want string
	}{
		{row{value: 60, budget: 60}, "PASS"},
		{row{value: 61, budget: 60}, "OVER"},
		{row{value: 0, budget: 0}, "PASS"},
		{row{value: 1, budget: 0}, "OVER"},
		{row{value: 5, budget: noBudget()}, "-"},
		{row{value: 1, budget: 60, err: errors.New("x")}, "ERROR"},
	}
	for _, c := range cases {
		if got := c.r.verdict(); got != c.want {
			t.Errorf("verdict(%+v) = %s, want %s", c.r, got, c.want)
		}
	}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	printTable(&b, []row{
		{name: "warm run", unit: unitDuration, value: float64(12500 * time.Microsecond), budget: float64(60 * time.Millisecond)},
		{name: "size", unit: unitBytes, value: 13e6, budget: 12e6},
		{name: "broken", unit: unitCount, budget: 17, err: errors.New("swtpm:\nno socket")},
	})
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("want header, rule and 3 rows, got %d lines:\n%s", len(lines), b.String())
	}
	for i, want := range [][]string{
		{"warm run", "12.5 ms", "≤ 60.0 ms", "PASS"},
		{"size", "13.0 MB", "≤ 12.0 MB", "OVER"},
		{"broken", "ERROR", "swtpm: no socket"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i+2], w) {
				t.Errorf("row %d %q lacks %q", i, lines[i+2], w)
			}
		}
	}
}
