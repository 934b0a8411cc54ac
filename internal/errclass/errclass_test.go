package errclass

import (
	"errors"
	"fmt"
	"testing"
)

func TestOfTakesTheOutermostClass(t *testing.T) {
	inner := New(Final, "pool", "pool exhausted")
	for _, c := range []struct {
		err  error
		want Class
		ok   bool
	}{
		{errors.New("plain"), Transient, false},
		{nil, Transient, false},
		{Configf("bad %s", "key"), Config, true},
		{fmt.Errorf("phase: %w", inner), Final, true},
		{Wrap(Config, "", fmt.Errorf("x: %w", inner)), Config, true},
		{fmt.Errorf("a: %w", Wrap(Usage, "", errors.New("flag"))), Usage, true},
	} {
		got, ok := Of(c.err)
		if got != c.want || ok != c.ok {
			t.Errorf("Of(%v) = %v %v, want %v %v", c.err, got, ok, c.want, c.ok)
		}
	}
	if !errors.Is(fmt.Errorf("w: %w", inner), inner) {
		t.Error("a sentinel is not found by errors.Is")
	}
	if Wrap(Config, "", nil) != nil {
		t.Error("Wrap(nil) is not nil")
	}
}

func TestCauseOfIsTheClassedErrorsName(t *testing.T) {
	if got := CauseOf(fmt.Errorf("x: %w", Configf("bad"))); got != "configuration" {
		t.Errorf("ConfigError's cause %q", got)
	}
	if got := CauseOf(Wrap(Transient, "", New(Final, "inner", "e"))); got != "" {
		t.Errorf("the outermost classed error names none, got %q", got)
	}
	if got := CauseOf(errors.New("plain")); got != "" {
		t.Errorf("plain error's cause %q", got)
	}
}
