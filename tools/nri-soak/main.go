// Command nri-soak is the data side of the soak (test/soak/soak.bash, make
// soak): it draws the seeded schedule of faults and churn, checks the
// invariants against what the soak recorded, and writes the summary and
// the plot. The soak itself (the cluster, the faults, the churn, the
// records) is test/soak/soak.bash on test/k8s/lib.bash.
//
//	nri-soak plan -seed S -duration D -nodes "crio containerd" [-kinds K,...] -faults F -churn C
//	    the schedule: F gets "GAP KIND NODE HOLD" lines, C "AT OP NODE ARG";
//	    prints the plan's digest
//	nri-soak check -dir DIR -logs LOGS [-live -until T -lag S]
//	    the invariants on DIR's records (LOGS: test/k8s/lib.bash's logs);
//	    -live checks what is complete while the soak runs. Writes
//	    DIR/violations.jsonl, prints the first violation; exit 1 if any
//	nri-soak report -dir DIR -logs LOGS
//	    every check, then DIR/summary.md, DIR/plot.png, DIR/outcome.json;
//	    exit 1 if a violation was found
//	nri-soak leaks -dir DIR
//	    what DIR/leaks' snapshots (one per node) hold that nothing accounts
//	    for; exit 1 if anything
//	nri-soak docs -out FILE -defects FILE DIR...
//	    docs/reliability.md from runs' directories (their summaries and
//	    plots, the plots copied next to FILE)
//
// Exit status 2: the records could not be read.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	code := 0
	switch os.Args[1] {
	case "plan":
		err = cmdPlan(os.Args[2:])
	case "check":
		code, err = cmdCheck(os.Args[2:])
	case "report":
		code, err = cmdReport(os.Args[2:])
	case "leaks":
		code, err = cmdLeaks(os.Args[2:])
	case "docs":
		err = cmdDocs(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nri-soak:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: nri-soak plan|check|report|leaks|docs [flags] (see the package comment)")
	os.Exit(2)
}

func cmdPlan(args []string) error {
	fs := flag.NewFlagSet("plan", flag.ExitOnError)
	seed := fs.Uint64("seed", 0, "the seed")
	duration := fs.Duration("duration", 0, "how long faults are injected")
	nodes := fs.String("nodes", "crio containerd", "each node's runtime, in order")
	kinds := fs.String("kinds", "", "the fault kinds to draw from, comma-separated (default: every kind)")
	faults := fs.String("faults", "", "file for the fault schedule")
	churnF := fs.String("churn", "", "file for the churn")
	_ = fs.Parse(args)
	if *duration <= 0 || *faults == "" || *churnF == "" {
		return fmt.Errorf("plan: -duration, -faults and -churn are required")
	}
	only := faultKinds
	if *kinds != "" {
		only = strings.Split(*kinds, ",")
		for _, k := range only {
			if !slices.Contains(faultKinds, k) {
				return fmt.Errorf("plan: -kinds: unknown fault kind %q (kinds: %s)", k, strings.Join(faultKinds, ", "))
			}
		}
	}
	p := makePlanOf(*seed, duration.Seconds(), strings.Fields(*nodes), only)
	for _, w := range []struct {
		file string
		f    func(*os.File) error
	}{
		{*faults, func(f *os.File) error { return p.writeFaults(f) }},
		{*churnF, func(f *os.File) error { return p.writeChurn(f) }},
	} {
		f, err := os.Create(w.file)
		if err != nil {
			return err
		}
		if err := w.f(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	fmt.Println(p.digest())
	return nil
}

func cmdCheck(args []string) (int, error) {
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	dir := fs.String("dir", "", "the soak's records")
	logs := fs.String("logs", "", "test/k8s/lib.bash's logs (default DIR/logs)")
	live := fs.Bool("live", false, "check while the soak runs: only what is complete")
	until := fs.Float64("until", 0, "leave out what came after this time (epoch seconds; default: the run's end)")
	lag := fs.Float64("lag", 20, "with -live: leave out what is younger than this many seconds")
	_ = fs.Parse(args)
	r, err := loadRecords(*dir, logsDir(*dir, *logs), *until)
	if err != nil {
		return 0, err
	}
	o := checkOpts{Live: *live}
	if *live {
		o.Lag = *lag
	}
	out := check(r, o)
	if err := writeViolations(*dir, out.Violations); err != nil {
		return 0, err
	}
	if len(out.Violations) == 0 {
		return 0, nil
	}
	fmt.Printf("%d violations; the first: %s\n", len(out.Violations), r.describe(out.Violations[0]))
	return 1, nil
}

func logsDir(dir, logs string) string {
	if logs != "" {
		return logs
	}
	return filepath.Join(dir, "logs")
}

func writeViolations(dir string, vs []violation) error {
	f, err := os.Create(filepath.Join(dir, "violations.jsonl"))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, v := range vs {
		if err := enc.Encode(v); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

func cmdReport(args []string) (int, error) {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	dir := fs.String("dir", "", "the soak's records")
	logs := fs.String("logs", "", "test/k8s/lib.bash's logs (default DIR/logs)")
	_ = fs.Parse(args)
	r, err := loadRecords(*dir, logsDir(*dir, *logs), 0)
	if err != nil {
		return 0, err
	}
	out := check(r, checkOpts{})
	if err := writeViolations(*dir, out.Violations); err != nil {
		return 0, err
	}
	if err := writePlot(r, filepath.Join(*dir, "plot.png")); err != nil {
		return 0, fmt.Errorf("plot: %w", err)
	}
	f, err := os.Create(filepath.Join(*dir, "summary.md"))
	if err != nil {
		return 0, err
	}
	writeSummary(f, r, out, "plot.png", 2)
	if err := f.Close(); err != nil {
		return 0, err
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(*dir, "outcome.json"), b, 0o644); err != nil {
		return 0, err
	}
	if len(out.Violations) > 0 {
		fmt.Printf("%d violations; the first: %s\n", len(out.Violations), r.describe(out.Violations[0]))
		return 1, nil
	}
	return 0, nil
}

func cmdLeaks(args []string) (int, error) {
	fs := flag.NewFlagSet("leaks", flag.ExitOnError)
	dir := fs.String("dir", "", "the soak's records")
	_ = fs.Parse(args)
	r, err := loadLeaks(*dir)
	if err != nil {
		return 0, err
	}
	if len(r.Leaks) == 0 {
		return 0, fmt.Errorf("no leak snapshots in %s/leaks", *dir)
	}
	_, vs := checkLeaks(r)
	for _, v := range vs {
		fmt.Println(v.Detail)
	}
	if len(vs) > 0 {
		return 1, nil
	}
	return 0, nil
}

func cmdDocs(args []string) error {
	fs := flag.NewFlagSet("docs", flag.ExitOnError)
	out := fs.String("out", "docs/reliability.md", "the file to write")
	defects := fs.String("defects", "", "the hand-kept list of defects the soak found (Markdown)")
	_ = fs.Parse(args)
	if fs.NArg() == 0 {
		return fmt.Errorf("docs: name at least one run directory")
	}
	var runs []docRun
	for _, dir := range fs.Args() {
		r, err := loadRecords(dir, logsDir(dir, ""), 0)
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		plot := fmt.Sprintf("reliability-%d.png", r.Run.Seed)
		b, err := os.ReadFile(filepath.Join(dir, "plot.png"))
		if err != nil {
			return fmt.Errorf("%s: run nri-soak report first: %w", dir, err)
		}
		if err := os.WriteFile(filepath.Join(filepath.Dir(*out), plot), b, 0o644); err != nil {
			return err
		}
		runs = append(runs, docRun{r: r, o: check(r, checkOpts{}), plot: plot})
	}
	var d []byte
	if *defects != "" {
		var err error
		// No file: no defect found yet.
		if d, err = os.ReadFile(*defects); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return err
		}
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	writeDocs(f, runs, string(d))
	return f.Close()
}
