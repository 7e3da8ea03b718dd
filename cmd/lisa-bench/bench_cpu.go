package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"syscall"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// processCPU is the CPU time (user + sys) this process has used so far,
// all threads; 0 if the system does not say.
func processCPU() time.Duration {
	user, sys := processTimes()
	return user + sys
}

// processTimes are the user and system CPU time this process has used so
// far, all threads.
func processTimes() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// cpuMeter measures this process's CPU, and the fakes', from its start
// to its stop, with a CPU profile of this process.
type cpuMeter struct {
	fakes     latencyFakes
	path      string // also write the profile here, if set
	prof      bytes.Buffer
	profiling bool
	user, sys time.Duration // at the start
	fakes0    time.Duration
	isolated  bool
}

// startCPUMeter starts measuring; the caller must stop it, or at least
// call stopProfile.
func startCPUMeter(ctx context.Context, fakes latencyFakes, path string) (*cpuMeter, error) {
	m := &cpuMeter{fakes: fakes, path: path}
	var err error
	if m.fakes0, m.isolated, err = fakes.cpu(ctx); err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(&m.prof); err != nil {
		return nil, err
	}
	m.profiling = true
	m.user, m.sys = processTimes()
	return m, nil
}

// stopProfile stops the CPU profile if it still runs.
func (m *cpuMeter) stopProfile() {
	if m.profiling {
		pprof.StopCPUProfile()
		m.profiling = false
	}
}

// stop ends the measurement of n invocations and reports it.
func (m *cpuMeter) stop(ctx context.Context, n int) (*cpuReport, error) {
	user, sys := processTimes()
	m.stopProfile()
	perInv := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(max(n, 1)) }
	rep := &cpuReport{LisaUsPerInvocation: perInv(user + sys - m.user - m.sys),
		LisaUserUs: perInv(user - m.user), LisaSysUs: perInv(sys - m.sys)}
	if m.isolated {
		fakes1, _, err := m.fakes.cpu(ctx)
		if err != nil {
			return nil, err
		}
		rep.FakesUsPerInvocation = perInv(fakes1 - m.fakes0)
	}
	var err error
	if rep.Profile, err = profileTop(m.prof.Bytes(), 10); err != nil {
		return nil, err
	}
	rep.Profile.SampledUsPerInvocation = float64(rep.Profile.cpuNs) / 1e3 / float64(max(n, 1))
	if m.path != "" {
		if err := os.WriteFile(m.path, m.prof.Bytes(), 0o644); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// funcShare is one function's share of a CPU profile's samples.
type funcShare struct {
	Name string `json:"name"`
	// Percent of all CPU samples: where the function was running (flat)
	// or on the stack (cumulative).
	Percent float64 `json:"percent"`
}

// cpuBreakdown is the top of a CPU profile, by flat and by cumulative
// share.
type cpuBreakdown struct {
	Samples int `json:"samples"`
	// SampledUsPerInvocation is the CPU time the profile's samples
	// account for, per invocation: the profiler misses some of what
	// getrusage counts.
	SampledUsPerInvocation float64     `json:"sampled_us_per_invocation"`
	Flat                   []funcShare `json:"top_flat"`
	Cum                    []funcShare `json:"top_cumulative"`

	cpuNs int64 // the samples' CPU time (or count, without a "cpu" type)
}

// pprofProfile is what the bench reads of a pprof profile
// (github.com/google/pprof/proto/profile.proto, which runtime/pprof
// writes gzipped): each sample's stack as function names, leaf first, and
// its value.
type pprofProfile struct {
	stacks [][]string
	values []int64
	// samples is how many times the profiler sampled (the "samples"
	// value; runtime/pprof merges samples with the same stack).
	samples int64
}

// profileTop returns the n functions with the largest flat and cumulative
// shares of the CPU profile in b (as runtime/pprof writes it).
func profileTop(b []byte, n int) (cpuBreakdown, error) {
	p, err := parseProfile(b)
	if err != nil {
		return cpuBreakdown{}, err
	}
	flat, cum := map[string]int64{}, map[string]int64{}
	var total int64
	for i, stack := range p.stacks {
		v := p.values[i]
		total += v
		if len(stack) > 0 {
			flat[stack[0]] += v
		}
		seen := map[string]bool{}
		for _, fn := range stack {
			if !seen[fn] {
				seen[fn] = true
				cum[fn] += v
			}
		}
	}
	return cpuBreakdown{Samples: int(p.samples), Flat: topShares(flat, total, n), Cum: topShares(cum, total, n), cpuNs: total}, nil
}

// topShares returns the n largest entries of by as percentages of total,
// largest first (ties by name).
func topShares(by map[string]int64, total int64, n int) []funcShare {
	out := make([]funcShare, 0, len(by))
	for name, v := range by {
		out = append(out, funcShare{Name: name, Percent: 100 * float64(v) / float64(max(total, 1))})
	}
	slices.SortFunc(out, func(a, b funcShare) int {
		if a.Percent != b.Percent {
			if a.Percent > b.Percent {
				return -1
			}
			return 1
		}
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	return out[:min(n, len(out))]
}

// profileRaw is a profile's messages by ID, before stacks are resolved.
type profileRaw struct {
	strs      []string
	funcName  map[uint64]int64    // function ID → name's string index
	locFuncs  map[uint64][]uint64 // location ID → function IDs, innermost first
	samples   [][]uint64          // location IDs, leaf first
	values    [][]int64
	valueType []int64 // sample types' type string indexes
}

// parseProfile decodes a gzipped pprof profile.
func parseProfile(b []byte) (*pprofProfile, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	r := &profileRaw{funcName: map[uint64]int64{}, locFuncs: map[uint64][]uint64{}}
	if err := eachField(raw, r.profileField); err != nil {
		return nil, err
	}
	return r.resolve(), nil
}

// resolve turns location and function IDs into names and picks the CPU
// time value ("cpu"), or the last one.
func (r *profileRaw) resolve() *pprofProfile {
	vi, ci := len(r.valueType)-1, -1
	for i, t := range r.valueType {
		if t >= 0 && int(t) < len(r.strs) {
			switch r.strs[t] {
			case "cpu":
				vi = i
			case "samples":
				ci = i
			}
		}
	}
	p := &pprofProfile{}
	for i, locs := range r.samples {
		var stack []string
		for _, l := range locs {
			for _, fn := range r.locFuncs[l] {
				if s := r.funcName[fn]; s >= 0 && int(s) < len(r.strs) {
					stack = append(stack, r.strs[s])
				}
			}
		}
		var v, c int64 = 1, 1
		if vi >= 0 && vi < len(r.values[i]) {
			v = r.values[i][vi]
		}
		if ci >= 0 && ci < len(r.values[i]) {
			c = r.values[i][ci]
		}
		p.samples += c
		p.stacks, p.values = append(p.stacks, stack), append(p.values, v)
	}
	return p
}

// profileField takes one top-level field of a Profile message.
func (r *profileRaw) profileField(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
	if typ != protowire.BytesType {
		return nil
	}
	switch num {
	case 1: // sample_type: ValueType{type = 1}
		var t int64 = -1
		err := eachField(v, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
			if n == 1 {
				t = int64(x)
			}
			return nil
		})
		r.valueType = append(r.valueType, t)
		return err
	case 2: // sample
		return r.sample(v)
	case 4: // location
		return r.location(v)
	case 5: // function: id = 1, name = 2
		var id uint64
		var name int64 = -1
		err := eachField(v, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
			switch n {
			case 1:
				id = x
			case 2:
				name = int64(x)
			}
			return nil
		})
		r.funcName[id] = name
		return err
	case 6: // string_table
		r.strs = append(r.strs, string(v))
	}
	return nil
}

// sample takes a Sample: location_id = 1, value = 2 (packed or not).
func (r *profileRaw) sample(b []byte) error {
	var locs []uint64
	var vals []int64
	err := eachField(b, func(n protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch n {
		case 1:
			return appendVarints(typ, v, x, func(u uint64) { locs = append(locs, u) })
		case 2:
			return appendVarints(typ, v, x, func(u uint64) { vals = append(vals, int64(u)) })
		}
		return nil
	})
	r.samples, r.values = append(r.samples, locs), append(r.values, vals)
	return err
}

// location takes a Location: id = 1, line = 4 (Line: function_id = 1).
func (r *profileRaw) location(b []byte) error {
	var id uint64
	var fns []uint64
	err := eachField(b, func(n protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case n == 1:
			id = x
		case n == 4 && typ == protowire.BytesType:
			return eachField(v, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
				if n == 1 {
					fns = append(fns, x)
				}
				return nil
			})
		}
		return nil
	})
	r.locFuncs[id] = fns
	return err
}

// appendVarints calls add for a varint field's value, or for each value
// of a packed one.
func appendVarints(typ protowire.Type, v []byte, x uint64, add func(uint64)) error {
	if typ == protowire.VarintType {
		add(x)
		return nil
	}
	for len(v) > 0 {
		u, n := protowire.ConsumeVarint(v)
		if n < 0 {
			return errors.New("profile: bad packed varint")
		}
		add(u)
		v = v[n:]
	}
	return nil
}

// eachField calls fn for each field of the protobuf message in b, with
// its bytes (length-delimited fields) or its value (varints and fixed).
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errors.New("profile: bad tag")
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var y uint32
			y, n = protowire.ConsumeFixed32(b)
			x = uint64(y)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errors.New("profile: bad field")
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}
