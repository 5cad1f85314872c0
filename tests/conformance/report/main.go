// Command conformance-report is the bookkeeping half of `make conformance`
// (tests/conformance/run.sh); the other half is upstream's e2e suite itself.
//
//	conformance-report regex [-match RE]... LIST...
//	    prints the regex matching the entries of the LISTs (tests/conformance/skips.txt,
//	    real-node.txt: "<spec full text> :: <reason>"), for --ginkgo.skip or --ginkgo.focus,
//	    or an empty line when none; with -match, only the entries whose "Kruise e2e suite
//	    <text>" every RE matches; with -each, one regex per entry, a line each (none
//	    when no entry is kept); fails when an entry has no reason
//	conformance-report summarize -skips SKIPS -real-node LIST -dir DIR SUITE=LABELFILTER...
//	    reads DIR/SUITE.json (Ginkgo's JSON report of the run on the kwok nodes, where the
//	    entries of SKIPS and LIST were skipped) and DIR/SUITE.real-node.json when it exists
//	    (the run of LIST's specs on the real node), keeps the specs the label filter
//	    selects, writes DIR/SUITE.junit.xml with only those (a spec of LIST with its result
//	    on the real node, a skipped spec with its reason), prints a Markdown table (suite,
//	    specs, run, of them on the real node, passed, failed, skipped), the skip reasons and
//	    every failure (spec location, assertion location, message), and exits 1 when a spec
//	    failed
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/onsi/ginkgo/v2/reporters"
	"github.com/onsi/ginkgo/v2/types"
)

// suiteDescription is what upstream passes to RunSpecs (test/e2e/e2e.go); Ginkgo matches
// focus and skip regexes against it followed by a space and the spec's full text.
const suiteDescription = "Kruise e2e suite"

type skip struct {
	text, reason string
	line         int
}

// readSkips parses "<spec full text> :: <reason>" lines; '#' starts a comment line.
func readSkips(path string) ([]skip, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []skip
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		text, reason, ok := strings.Cut(line, "::")
		text, reason = strings.TrimSpace(text), strings.TrimSpace(reason)
		if !ok || text == "" || reason == "" {
			return nil, fmt.Errorf("%s:%d: want \"<spec full text> :: <reason>\", every skip names its reason", path, n)
		}
		out = append(out, skip{text: text, reason: reason, line: n})
	}
	return out, sc.Err()
}

func specRegex(skips []skip) string {
	if len(skips) == 0 {
		return ""
	}
	alts := make([]string, len(skips))
	for i, s := range skips {
		alts[i] = regexp.QuoteMeta(s.text)
	}
	return "^" + regexp.QuoteMeta(suiteDescription) + " (" + strings.Join(alts, "|") + ")$"
}

// location shortens a -trimpath file name to the path inside upstream's repository.
func location(l types.CodeLocation) string {
	name := l.FileName
	if i := strings.Index(name, "@"); i >= 0 {
		if j := strings.Index(name[i:], "/"); j >= 0 {
			name = name[i+j+1:]
		}
	}
	return fmt.Sprintf("%s:%d", name, l.LineNumber)
}

// group names the upstream package a spec lives in: CloneSet and SidecarSet are tested
// once per API version with the same spec texts (test/e2e/apps/v1alpha1, .../v1beta1).
func group(spec types.SpecReport) string {
	loc := location(spec.LeafNodeLocation)
	dir := filepath.Dir(strings.TrimPrefix(loc, "test/e2e/"))
	return dir
}

type row struct {
	name                                           string
	specs, run, onReal, passed, failed, skippedNum int
}

// realNodeName is the node tests/cluster/node.sh starts (`make up-real`).
const realNodeName = "real-0"

// readReports reads one Ginkgo JSON report file.
func readReports(path string) ([]types.Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var reports []types.Report
	if err := json.Unmarshal(data, &reports); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return reports, nil
}

// specKey names a spec across runs of the same binary: its text and where it is declared
// (the two API versions' copies share the text).
func specKey(spec types.SpecReport) string {
	return spec.FullText() + "\x00" + location(spec.LeafNodeLocation)
}

func summarize(args []string) int {
	fs := flag.NewFlagSet("summarize", flag.ExitOnError)
	skipsPath := fs.String("skips", "", "skips.txt")
	realNodePath := fs.String("real-node", "", "real-node.txt: specs run on the real node only")
	dir := fs.String("dir", "", "directory of <suite>.json reports")
	_ = fs.Parse(args)
	skips, err := readSkips(*skipsPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	reasons := map[string]string{}
	for _, s := range skips {
		reasons[s.text] = s.reason
	}
	realNode := map[string]string{}
	if *realNodePath != "" {
		entries, err := readSkips(*realNodePath)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		for _, s := range entries {
			realNode[s.text] = s.reason
		}
	}

	var rows []row
	var failed []entry
	skipped := map[string]*skippedSpec{} // by reason and text: one line for both API versions
	var skippedOrder []string
	for _, arg := range fs.Args() {
		suite, filter, ok := strings.Cut(arg, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "summarize: want SUITE=LABELFILTER, got %q\n", arg)
			return 2
		}
		matches, err := types.ParseLabelFilter(filter)
		if err != nil {
			fmt.Fprintf(os.Stderr, "summarize: %s: %v\n", suite, err)
			return 2
		}
		reports, err := readReports(filepath.Join(*dir, suite+".json"))
		if err != nil {
			fmt.Fprintf(os.Stderr, "summarize: %v\n", err)
			return 2
		}
		// The specs of real-node.txt that ran on the real node, by spec; a suite-level
		// node that failed there is a failure of the suite.
		onReal := map[string]types.SpecReport{}
		realReports, err := readReports(filepath.Join(*dir, suite+".real-node.json"))
		switch {
		case err == nil:
			for _, report := range realReports {
				for _, spec := range report.SpecReports {
					switch {
					case spec.LeafNodeType == types.NodeTypeIt && (spec.State == types.SpecStatePassed || spec.State.Is(types.SpecStateFailureStates)):
						onReal[specKey(spec)] = spec
					case spec.LeafNodeType != types.NodeTypeIt && spec.State.Is(types.SpecStateFailureStates):
						failed = append(failed, entry{suite, spec.Failure.Location, fmt.Sprintf("- **%s** (on %s) %s `%s` at %s\n  %s", suite, realNodeName, spec.LeafNodeType, spec.LeafNodeText,
							location(spec.Failure.Location), indent(spec.Failure.Message))})
					}
				}
			}
		case !os.IsNotExist(err):
			fmt.Fprintf(os.Stderr, "summarize: %v\n", err)
			return 2
		}
		for _, report := range reports {
			byGroup := map[string]*row{}
			var kept types.SpecReports
			for _, spec := range report.SpecReports {
				if spec.LeafNodeType != types.NodeTypeIt {
					// Suite-level nodes: only a failing one is worth a line.
					if spec.State.Is(types.SpecStateFailureStates) {
						failed = append(failed, entry{suite, spec.Failure.Location, fmt.Sprintf("- **%s** %s `%s` at %s\n  %s", suite, spec.LeafNodeType, spec.LeafNodeText,
							location(spec.Failure.Location), indent(spec.Failure.Message))})
						kept = append(kept, spec)
					}
					continue
				}
				if !matches(spec.Labels()) {
					continue
				}
				g := group(spec)
				r := byGroup[g]
				if r == nil {
					r = &row{name: suite + " (" + g + ")"}
					byGroup[g] = r
				}
				r.specs++
				text := spec.FullText()
				where := ""
				if real, ok := onReal[specKey(spec)]; ok && spec.State == types.SpecStateSkipped {
					spec, where = real, " (on "+realNodeName+")"
					r.onReal++
				}
				switch {
				case spec.State == types.SpecStatePassed:
					r.run++
					r.passed++
				case spec.State.Is(types.SpecStateFailureStates):
					r.run++
					r.failed++
					failed = append(failed, entry{r.name, spec.LeafNodeLocation, fmt.Sprintf("- **%s** `%s`%s (%s)\n  at %s: %s", r.name, text, where,
						location(spec.LeafNodeLocation), location(spec.Failure.Location), indent(spec.Failure.Message))})
				default: // skipped or pending
					r.skippedNum++
					reason, ok := reasons[text]
					if needs, listed := realNode[text]; listed && !ok {
						reason, ok = "needs the real node "+realNodeName+" (`make up-real`), not run on it here: "+needs, true
					}
					switch {
					case ok:
					case spec.State == types.SpecStatePending:
						reason = "pending upstream (PIt)"
					case spec.Failure.Message != "":
						reason = "skipped by the spec: " + spec.Failure.Message
					default:
						reason = "not selected (no entry in skips.txt)"
					}
					spec.Failure.Message = reason
					key := reason + "\x00" + text
					if skipped[key] == nil {
						skipped[key] = &skippedSpec{text: text, reason: reason}
						skippedOrder = append(skippedOrder, key)
					}
					skipped[key].where = append(skipped[key].where, entry{r.name, spec.LeafNodeLocation, location(spec.LeafNodeLocation)})
				}
				kept = append(kept, spec)
			}
			names := make([]string, 0, len(byGroup))
			for g := range byGroup {
				names = append(names, g)
			}
			sort.Strings(names)
			for _, g := range names {
				rows = append(rows, *byGroup[g])
			}
			junit := report
			junit.SpecReports = kept
			out := filepath.Join(*dir, suite+".junit.xml")
			if err := reporters.GenerateJUnitReportWithConfig(junit, out, reporters.JunitReportConfig{
				OmitTimelinesForSpecState: types.SpecStatePassed | types.SpecStateSkipped | types.SpecStatePending,
			}); err != nil {
				fmt.Fprintf(os.Stderr, "summarize: %v\n", err)
				return 2
			}
		}
	}

	fmt.Printf("| suite | specs | run | of them on %s | passed | failed | skipped (reasons below) |\n", realNodeName)
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
	var total row
	for _, r := range rows {
		fmt.Printf("| %s | %d | %d | %d | %d | %d | %d |\n", r.name, r.specs, r.run, r.onReal, r.passed, r.failed, r.skippedNum)
		total.specs += r.specs
		total.run += r.run
		total.onReal += r.onReal
		total.passed += r.passed
		total.failed += r.failed
		total.skippedNum += r.skippedNum
	}
	if len(rows) > 1 {
		fmt.Printf("| **total** | %d | %d | %d | %d | %d | %d |\n", total.specs, total.run, total.onReal, total.passed, total.failed, total.skippedNum)
	}
	if len(skippedOrder) > 0 {
		fmt.Println("\nSkipped (tests/conformance/skips.txt, real-node.txt):")
		for _, k := range skippedOrder {
			sortEntries(skipped[k].where)
		}
		sort.SliceStable(skippedOrder, func(i, j int) bool {
			return less(skipped[skippedOrder[i]].where[0], skipped[skippedOrder[j]].where[0])
		})
		for _, k := range skippedOrder {
			s := skipped[k]
			var at []string
			for _, w := range s.where {
				at = append(at, w.text)
			}
			fmt.Printf("- `%s` (%s): %s\n", s.text, strings.Join(at, ", "), s.reason)
		}
	}
	if len(failed) > 0 {
		fmt.Println("\nFailed:")
		sortEntries(failed)
		for _, f := range failed {
			fmt.Println(f.text)
		}
		return 1
	}
	return 0
}

// entry is a line of the summary, ordered by suite and upstream file:line.
type entry struct {
	group string
	at    types.CodeLocation
	text  string
}

type skippedSpec struct {
	text, reason string
	where        []entry
}

func less(a, b entry) bool {
	if a.group != b.group {
		return a.group < b.group
	}
	if a.at.FileName != b.at.FileName {
		return a.at.FileName < b.at.FileName
	}
	return a.at.LineNumber < b.at.LineNumber
}

func sortEntries(es []entry) {
	sort.SliceStable(es, func(i, j int) bool { return less(es[i], es[j]) })
}

// indent keeps the first lines of a failure message (the JUnit file and <suite>.log have
// it whole) and indents them under their list item.
func indent(s string) string {
	const keep = 8
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > keep {
		lines = append(lines[:keep], "…")
	}
	return strings.Join(lines, "\n    ")
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: conformance-report regex [-match RE]... [-each] LIST... | summarize -skips SKIPS [-real-node LIST] -dir DIR SUITE=LABELFILTER...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "regex":
		fs := flag.NewFlagSet("regex", flag.ExitOnError)
		var keep []*regexp.Regexp
		fs.Func("match", "keep only the entries whose \""+suiteDescription+" <text>\" this regex matches (repeatable: all must match)", func(re string) error {
			r, err := regexp.Compile(re)
			keep = append(keep, r)
			return err
		})
		each := fs.Bool("each", false, "one regex per entry, a line each, to run the entries one at a time")
		_ = fs.Parse(os.Args[2:])
		if fs.NArg() == 0 {
			fmt.Fprintln(os.Stderr, "usage: conformance-report regex [-match RE]... [-each] LIST...")
			os.Exit(2)
		}
		kept := func(text string) bool {
			for _, r := range keep {
				if !r.MatchString(suiteDescription + " " + text) {
					return false
				}
			}
			return true
		}
		var all []skip
		for _, path := range fs.Args() {
			entries, err := readSkips(path)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			for _, e := range entries {
				if kept(e.text) {
					all = append(all, e)
				}
			}
		}
		if *each {
			for _, e := range all {
				fmt.Println(specRegex([]skip{e}))
			}
			return
		}
		fmt.Println(specRegex(all))
	case "summarize":
		os.Exit(summarize(os.Args[2:]))
	default:
		fmt.Fprintf(os.Stderr, "conformance-report: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}
