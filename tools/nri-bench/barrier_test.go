package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nrigate/nrigate/test/critest"
)

func TestSplitWaits(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	regs := []registration{
		{configured: at(0), synced: at(100)},
		{configured: at(200), synced: at(210)},
		{configured: at(300), synced: at(310)}, // no log lines in it: left out
	}
	// A sync start of an earlier plugin (nri-faulty's) and the two
	// registrations' starts and sends.
	starts := []time.Time{at(-50), at(40), at(201)}
	sends := []time.Time{at(-49), at(90), at(209)}
	before, listing, request := splitWaits(regs, starts, sends)
	want := func(name string, got []time.Duration, ms ...int) {
		t.Helper()
		if len(got) != len(ms) {
			t.Fatalf("%s: %v, want %v ms", name, got, ms)
		}
		for i, m := range ms {
			if got[i] != time.Duration(m)*time.Millisecond {
				t.Fatalf("%s: %v, want %v ms", name, got, ms)
			}
		}
	}
	want("before", before, 40, 1)
	want("listing", listing, 50, 8)
	want("request", request, 10, 1)
}

func TestMedianRatio(t *testing.T) {
	ms := func(v int) []time.Duration { return []time.Duration{time.Duration(v) * time.Millisecond} }
	var a, b []barrierRound
	for i, v := range []int{300, 320, 340, 360, 380} {
		a = append(a, barrierRound{regBusy: ms(v)})
		b = append(b, barrierRound{regBusy: ms([]int{100, 80, 100, 90, 95}[i])})
	}
	r, lo, hi := medianRatio(a, b, 1)
	// Per-round ratios 3, 4, 3.4, 4, 4.
	if r != 4 || lo > r || hi < r {
		t.Fatalf("median ratio %v [%v, %v], want 4 inside its interval", r, lo, hi)
	}
}

func TestBlockHolds(t *testing.T) {
	dir := t.TempDir()
	log := `time="2026-12-05T12:00:00Z" level=info msg="Bench: plugin sync blocked for 4.2ms"
time="2026-12-05T12:00:00Z" level=info msg="Created container"
time="2026-12-05T12:00:01Z" level=info msg="Bench: plugin sync blocked for 850µs"
`
	if err := os.WriteFile(filepath.Join(dir, "daemon.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	held, err := blockHolds(&daemon{Runtime: &critest.Runtime{Dir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 2 || held[0] != 4200*time.Microsecond || held[1] != 850*time.Microsecond {
		t.Fatalf("block holds %v, want [4.2ms 850µs]", held)
	}
	if err := os.WriteFile(filepath.Join(dir, "daemon.log"), []byte("nothing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := blockHolds(&daemon{Runtime: &critest.Runtime{Dir: dir}}); err == nil {
		t.Fatal("a log without block durations gave no error")
	}
}
