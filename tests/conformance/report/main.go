// Command conformance-report is the bookkeeping half of `make conformance`
// (tests/conformance/run.sh); the other half is upstream's e2e suite itself.
//
//	conformance-report skip-regex SKIPS
//	    prints the --ginkgo.skip regex for the entries of SKIPS (tests/conformance/skips.txt);
//	    fails when an entry has no reason
//	conformance-report summarize -skips SKIPS -dir DIR SUITE=LABELFILTER...
//	    reads DIR/SUITE.json (Ginkgo's JSON report), keeps the specs the label filter
//	    selects, writes DIR/SUITE.junit.xml with only those (a skipped spec carries its
//	    reason), prints a Markdown table (suite, specs, run, passed, failed, skipped), the
//	    skip reasons and every failure (spec location, assertion location, message), and
//	    exits 1 when a spec failed
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

func skipRegex(skips []skip) string {
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
	name                                   string
	specs, run, passed, failed, skippedNum int
}

func summarize(args []string) int {
	fs := flag.NewFlagSet("summarize", flag.ExitOnError)
	skipsPath := fs.String("skips", "", "skips.txt")
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
		data, err := os.ReadFile(filepath.Join(*dir, suite+".json"))
		if err != nil {
			fmt.Fprintf(os.Stderr, "summarize: %v\n", err)
			return 2
		}
		var reports []types.Report
		if err := json.Unmarshal(data, &reports); err != nil {
			fmt.Fprintf(os.Stderr, "summarize: %s.json: %v\n", suite, err)
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
				switch {
				case spec.State == types.SpecStatePassed:
					r.run++
					r.passed++
				case spec.State.Is(types.SpecStateFailureStates):
					r.run++
					r.failed++
					failed = append(failed, entry{r.name, spec.LeafNodeLocation, fmt.Sprintf("- **%s** `%s` (%s)\n  at %s: %s", r.name, text,
						location(spec.LeafNodeLocation), location(spec.Failure.Location), indent(spec.Failure.Message))})
				default: // skipped or pending
					r.skippedNum++
					reason, ok := reasons[text]
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

	fmt.Println("| suite | specs | run | passed | failed | skipped (reasons below) |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	var total row
	for _, r := range rows {
		fmt.Printf("| %s | %d | %d | %d | %d | %d |\n", r.name, r.specs, r.run, r.passed, r.failed, r.skippedNum)
		total.specs += r.specs
		total.run += r.run
		total.passed += r.passed
		total.failed += r.failed
		total.skippedNum += r.skippedNum
	}
	if len(rows) > 1 {
		fmt.Printf("| **total** | %d | %d | %d | %d | %d |\n", total.specs, total.run, total.passed, total.failed, total.skippedNum)
	}
	if len(skippedOrder) > 0 {
		fmt.Println("\nSkipped (tests/conformance/skips.txt):")
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
		fmt.Fprintln(os.Stderr, "usage: conformance-report skip-regex SKIPS | summarize -skips SKIPS -dir DIR SUITE=LABELFILTER...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "skip-regex":
		if len(os.Args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: conformance-report skip-regex SKIPS")
			os.Exit(2)
		}
		skips, err := readSkips(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(skipRegex(skips))
	case "summarize":
		os.Exit(summarize(os.Args[2:]))
	default:
		fmt.Fprintf(os.Stderr, "conformance-report: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}
