package fault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// Spec is one fault to inject at a hook point, parsed from text (an
// environment variable's value, see FromEnv):
//
//	<point>[@<n>][:fail|:crash]
//
// fires at the n-th arrival (from 1; default 1) at the point; "fail" (the
// default) injects an error, "crash" ends the process there.
type Spec struct {
	Point Name
	Nth   int64 // the arrival that fires, from 1
	Crash bool  // end the process instead of returning an error

	seen atomic.Int64
}

// ParseSpec parses a Spec whose point must be one of points.
func ParseSpec(v string, points []Name) (*Spec, error) {
	s := &Spec{Nth: 1}
	spec, mode, hasMode := strings.Cut(v, ":")
	if hasMode {
		switch mode {
		case "fail":
		case "crash":
			s.Crash = true
		default:
			return nil, fmt.Errorf("fault: %q: mode must be fail or crash", v)
		}
	}
	point, nth, hasNth := strings.Cut(spec, "@")
	if hasNth {
		n, err := strconv.ParseInt(nth, 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("fault: %q: arrival must be a number >= 1", v)
		}
		s.Nth = n
	}
	if !slices.Contains(points, Name(point)) {
		return nil, fmt.Errorf("fault: %q: unknown fault point %q", v, point)
	}
	s.Point = Name(point)
	return s, nil
}

// ErrSpec is the error a Spec's Func injects when its mode is "fail".
var ErrSpec = errors.New("fault: failure asked for by a spec")

// Func returns the Func of s: at the s.Nth arrival at s.Point it calls
// crash if s.Crash (crash is expected not to return; FromEnv's SIGKILLs
// the process), then injects ErrSpec. Other arrivals pass.
func (s *Spec) Func(crash func()) Func {
	return func(_ context.Context, at *At) error {
		if at.Point != s.Point || s.seen.Add(1) != s.Nth {
			return nil
		}
		if s.Crash {
			crash()
		}
		return ErrSpec
	}
}
