// schema-parity compares the CustomResourceDefinitions this project ships (deploy/crds)
// with OpenKruise's own (config/crd/bases of github.com/openkruise/kruise at the pinned
// tag), so that a manifest written for OpenKruise means the same here, field for field.
//
// For every upstream CRD and version it walks openAPIV3Schema and reports:
//
//	pruned   a property path upstream accepts that ours would drop on write (not in our
//	         schema, and no ancestor of ours preserves unknown fields)
//	type     the same path with another type (int-or-string counted as its own type)
//	enum     our enum refuses a value upstream's accepts (or upstream has no enum there)
//	crd, version, scope, shortNames, categories, subresources, printerColumns
//	         the CRD's or the version's outline differs
//
// Each difference is one line `<kind> <crd>/<version> <path-or-detail>`. A line listed in
// the allowlist (allowlist.txt: the line, then ` # ` and the reason) is accepted; anything
// else fails the run, and so does an allowlist line that no longer matches (the difference
// is gone: take it out). Paths only ours accepts are counted, not failed.
//
// Usage: schema-parity -upstream DIR -ours DIR -allowlist FILE [-v]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

type schema struct {
	Type                 string             `json:"type"`
	Format               string             `json:"format"`
	Properties           map[string]*schema `json:"properties"`
	Items                *schema            `json:"items"`
	AdditionalProperties *schemaOrBool      `json:"additionalProperties"`
	Enum                 []interface{}      `json:"enum"`
	PreserveUnknown      bool               `json:"x-kubernetes-preserve-unknown-fields"`
	IntOrString          bool               `json:"x-kubernetes-int-or-string"`
	EmbeddedResource     bool               `json:"x-kubernetes-embedded-resource"`
	AllOf                []*schema          `json:"allOf"`
	AnyOf                []*schema          `json:"anyOf"`
	OneOf                []*schema          `json:"oneOf"`
}

// schemaOrBool is additionalProperties: a schema, or `true` (anything) / `false`.
type schemaOrBool struct {
	Schema *schema
	Allows bool
}

func (s *schemaOrBool) UnmarshalJSON(b []byte) error {
	if string(b) == "true" || string(b) == "false" {
		s.Allows = string(b) == "true"
		return nil
	}
	s.Schema = &schema{}
	s.Allows = true
	return yaml.Unmarshal(b, s.Schema)
}

type column struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	JSONPath string `json:"jsonPath"`
	Priority int    `json:"priority"`
}

type version struct {
	Name    string   `json:"name"`
	Served  bool     `json:"served"`
	Storage bool     `json:"storage"`
	Columns []column `json:"additionalPrinterColumns"`
	Schema  struct {
		OpenAPIV3Schema *schema `json:"openAPIV3Schema"`
	} `json:"schema"`
	Subresources map[string]interface{} `json:"subresources"`
}

type crd struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Scope string `json:"scope"`
		Names struct {
			ShortNames []string `json:"shortNames"`
			Categories []string `json:"categories"`
		} `json:"names"`
		Versions []version `json:"versions"`
	} `json:"spec"`
}

// node is one property path's facts.
type node struct {
	typ      string
	enum     []string
	preserve bool
}

func main() {
	upstream := flag.String("upstream", "", "upstream CRD directory (config/crd/bases)")
	ours := flag.String("ours", "deploy/crds", "our CRD directory")
	allowPath := flag.String("allowlist", "", "allowlist file")
	verbose := flag.Bool("v", false, "print the allowlisted differences and the paths only ours accepts")
	flag.Parse()
	if *upstream == "" || *allowPath == "" {
		fmt.Fprintln(os.Stderr, "usage: schema-parity -upstream DIR -ours DIR -allowlist FILE")
		os.Exit(2)
	}
	up, err := load(*upstream)
	check(err)
	our, err := load(*ours)
	check(err)
	allow, err := loadAllowlist(*allowPath)
	check(err)

	var diffs, extra []string
	paths := 0
	names := sortedKeys(up)
	for _, name := range names {
		u := up[name]
		o, ok := our[name]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("crd %s missing", name))
			continue
		}
		d, e, n := compareCRD(name, u, o)
		diffs = append(diffs, d...)
		extra = append(extra, e...)
		paths += n
	}
	sort.Strings(diffs)

	var failed, accepted []string
	used := map[string]bool{}
	for _, d := range diffs {
		if _, ok := allow[d]; ok {
			accepted = append(accepted, d)
			used[d] = true
		} else {
			failed = append(failed, d)
		}
	}
	var stale []string
	for line := range allow {
		if !used[line] {
			stale = append(stale, line)
		}
	}
	sort.Strings(stale)

	pruned, gaps := 0, 0
	for _, d := range diffs {
		if strings.HasPrefix(d, "pruned ") {
			pruned++
		}
		if strings.HasPrefix(allow[d], "GAP") {
			gaps++
		}
	}
	if *verbose {
		for _, d := range accepted {
			fmt.Printf("allowed: %s  # %s\n", d, allow[d])
		}
		for _, e := range extra {
			fmt.Printf("ours only: %s\n", e)
		}
	}
	for _, d := range failed {
		fmt.Printf("DIFFERENT: %s\n", d)
	}
	for _, s := range stale {
		fmt.Printf("STALE ALLOWLIST LINE (no such difference any more; remove it): %s\n", s)
	}
	fmt.Printf("schema-parity: %d CRDs, %d upstream paths, %d differences (%d pruned), %d allowlisted (%d of them known gaps), %d not allowed, %d stale allowlist lines; %d paths only ours accepts\n",
		len(names), paths, len(diffs), pruned, len(accepted), gaps, len(failed), len(stale), len(extra))
	if len(failed) > 0 || len(stale) > 0 {
		os.Exit(1)
	}
}

func compareCRD(name string, u, o *crd) (diffs, extra []string, paths int) {
	if u.Spec.Scope != o.Spec.Scope {
		diffs = append(diffs, fmt.Sprintf("scope %s %s→%s", name, u.Spec.Scope, o.Spec.Scope))
	}
	if !sameSet(u.Spec.Names.ShortNames, o.Spec.Names.ShortNames) {
		diffs = append(diffs, fmt.Sprintf("shortNames %s %v→%v", name, u.Spec.Names.ShortNames, o.Spec.Names.ShortNames))
	}
	if !sameSet(u.Spec.Names.Categories, o.Spec.Names.Categories) {
		diffs = append(diffs, fmt.Sprintf("categories %s %v→%v", name, u.Spec.Names.Categories, o.Spec.Names.Categories))
	}
	ours := map[string]version{}
	for _, v := range o.Spec.Versions {
		ours[v.Name] = v
	}
	for _, uv := range u.Spec.Versions {
		id := name + "/" + uv.Name
		ov, ok := ours[uv.Name]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("version %s missing", id))
			continue
		}
		if !reflect.DeepEqual(subresourceOutline(uv.Subresources), subresourceOutline(ov.Subresources)) {
			diffs = append(diffs, fmt.Sprintf("subresources %s %v→%v", id, subresourceOutline(uv.Subresources), subresourceOutline(ov.Subresources)))
		}
		if c1, c2 := columns(uv.Columns), columns(ov.Columns); c1 != c2 {
			diffs = append(diffs, fmt.Sprintf("printerColumns %s %s→%s", id, c1, c2))
		}
		un, on := map[string]node{}, map[string]node{}
		walk("", uv.Schema.OpenAPIV3Schema, un)
		walk("", ov.Schema.OpenAPIV3Schema, on)
		paths += len(un)
		for _, p := range sortedKeys(un) {
			a := un[p]
			b, ok := on[p]
			if !ok {
				if !preservedBy(p, on) && !implicit(p) {
					diffs = append(diffs, fmt.Sprintf("pruned %s %s", id, p))
				}
				continue
			}
			if a.typ != b.typ && !(a.typ == "" || b.typ == "") {
				diffs = append(diffs, fmt.Sprintf("type %s %s %s→%s", id, p, a.typ, b.typ))
			}
			if len(b.enum) > 0 && !subset(a.enum, b.enum) {
				diffs = append(diffs, fmt.Sprintf("enum %s %s %v→%v", id, p, a.enum, b.enum))
			}
		}
		for _, p := range sortedKeys(on) {
			if _, ok := un[p]; !ok && !preservedBy(p, un) && !implicit(p) {
				extra = append(extra, id+" "+p)
			}
		}
	}
	return diffs, extra, paths
}

// walk records every property path below s: `a.b`, `a[]` for array items, `a{}` for the
// values of a map.
func walk(path string, s *schema, out map[string]node) {
	if s == nil {
		return
	}
	merged := *s
	for _, list := range [][]*schema{s.AllOf, s.AnyOf, s.OneOf} {
		for _, sub := range list {
			if sub == nil {
				continue
			}
			for k, v := range sub.Properties {
				if merged.Properties == nil {
					merged.Properties = map[string]*schema{}
				}
				if _, ok := merged.Properties[k]; !ok {
					merged.Properties[k] = v
				}
			}
		}
	}
	if path != "" {
		typ := s.Type
		if s.IntOrString {
			typ = "int-or-string"
		}
		n := node{typ: typ, preserve: s.PreserveUnknown || (s.AdditionalProperties != nil && s.AdditionalProperties.Schema == nil && s.AdditionalProperties.Allows)}
		for _, e := range s.Enum {
			n.enum = append(n.enum, fmt.Sprint(e))
		}
		sort.Strings(n.enum)
		out[path] = n
	}
	for k, v := range merged.Properties {
		walk(join(path, k), v, out)
	}
	if s.Items != nil {
		walk(path+"[]", s.Items, out)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walk(path+"{}", s.AdditionalProperties.Schema, out)
	}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// implicit: the apiserver keeps an object's own apiVersion, kind and metadata whatever the
// schema says about them.
func implicit(p string) bool {
	root := p
	if i := strings.IndexAny(p, ".[{"); i >= 0 {
		root = p[:i]
	}
	return root == "apiVersion" || root == "kind" || root == "metadata"
}

// preservedBy: an ancestor of p keeps unknown fields in the other schema, so p is kept.
func preservedBy(p string, other map[string]node) bool {
	for q := parent(p); q != ""; q = parent(q) {
		if n, ok := other[q]; ok && n.preserve {
			return true
		}
	}
	return false
}

func parent(p string) string {
	i := strings.LastIndexAny(p, ".[{")
	if i <= 0 {
		return ""
	}
	return p[:i]
}

func subresourceOutline(s map[string]interface{}) []string {
	var out []string
	for k, v := range s {
		if m, ok := v.(map[string]interface{}); ok && len(m) > 0 {
			for _, f := range sortedKeys(m) {
				out = append(out, fmt.Sprintf("%s.%s=%v", k, f, m[f]))
			}
		} else {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func columns(cs []column) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s(%s %s p%d)", c.Name, c.Type, c.JSONPath, c.Priority))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func load(dir string) (map[string]*crd, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	out := map[string]*crd{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, doc := range strings.Split(string(raw), "\n---") {
			if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(doc), "---")) == "" {
				continue
			}
			c := &crd{}
			if err := yaml.Unmarshal([]byte(doc), c); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if c.Kind != "CustomResourceDefinition" {
				continue
			}
			out[c.Metadata.Name] = c
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinition in %s", dir)
	}
	return out, nil
}

// loadAllowlist reads `<difference> # <reason>` lines; a line without a reason is an error.
func loadAllowlist(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		diff, reason, ok := strings.Cut(line, " # ")
		if !ok || strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("%s:%d: no reason (` # why`) for %q", path, n, line)
		}
		out[strings.TrimSpace(diff)] = strings.TrimSpace(reason)
	}
	return out, sc.Err()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sameSet(a, b []string) bool {
	a, b = append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	return reflect.DeepEqual(a, b) || (len(a) == 0 && len(b) == 0)
}

func subset(a, b []string) bool {
	if len(a) == 0 {
		return false
	}
	in := map[string]bool{}
	for _, x := range b {
		in[x] = true
	}
	for _, x := range a {
		if !in[x] {
			return false
		}
	}
	return true
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "schema-parity:", err)
		os.Exit(2)
	}
}
