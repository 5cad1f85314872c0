package main

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func crdOf(t *testing.T, schemaYAML string) *crd {
	t.Helper()
	doc := `kind: CustomResourceDefinition
metadata: {name: things.example.io}
spec:
  scope: Namespaced
  names: {shortNames: [th]}
  versions:
  - name: v1
    schema:
      openAPIV3Schema:
` + indent(schemaYAML, "        ")
	c := &crd{}
	if err := yaml.Unmarshal([]byte(doc), c); err != nil {
		t.Fatal(err)
	}
	return c
}

func indent(s, pre string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := range lines {
		lines[i] = pre + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

func TestPrunedTypeAndEnum(t *testing.T) {
	upstream := crdOf(t, `
type: object
properties:
  spec:
    type: object
    properties:
      replicas: {type: integer}
      mode: {type: string}
      surge: {x-kubernetes-int-or-string: true}
      gone: {type: string}
      free:
        type: object
        properties:
          inner: {type: string}
      items:
        type: array
        items:
          type: object
          properties:
            name: {type: string}
`)
	ours := crdOf(t, `
type: object
properties:
  spec:
    type: object
    properties:
      replicas: {type: string}
      mode: {type: string, enum: [A, B]}
      surge: {x-kubernetes-int-or-string: true}
      free: {type: object, x-kubernetes-preserve-unknown-fields: true}
      items:
        type: array
        items:
          type: object
          properties: {}
`)
	diffs, _, paths := compareCRD("things.example.io", upstream, ours)
	got := strings.Join(diffs, "\n")
	for _, want := range []string{
		"pruned things.example.io/v1 spec.gone",
		"pruned things.example.io/v1 spec.items[].name",
		"type things.example.io/v1 spec.replicas integer→string",
		"enum things.example.io/v1 spec.mode []→[A B]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	// Kept by the preserving ancestor: not pruned.
	if strings.Contains(got, "spec.free.inner") {
		t.Errorf("spec.free.inner is preserved by spec.free:\n%s", got)
	}
	if len(diffs) != 4 {
		t.Errorf("want 4 differences, got %d:\n%s", len(diffs), got)
	}
	if paths != 10 {
		t.Errorf("want 10 upstream paths, got %d", paths)
	}
}

func TestOutline(t *testing.T) {
	a := crdOf(t, `{type: object}`)
	b := crdOf(t, `{type: object}`)
	b.Spec.Scope = "Cluster"
	b.Spec.Names.ShortNames = nil
	diffs, _, _ := compareCRD("things.example.io", a, b)
	got := strings.Join(diffs, "\n")
	if !strings.Contains(got, "scope things.example.io Namespaced→Cluster") || !strings.Contains(got, "shortNames things.example.io [th]→[]") {
		t.Errorf("outline differences not reported:\n%s", got)
	}
}

func TestImplicitRootFields(t *testing.T) {
	for p, want := range map[string]bool{"metadata": true, "metadata.name": true, "kind": true, "spec.template.metadata": false} {
		if implicit(p) != want {
			t.Errorf("implicit(%q) = %v", p, !want)
		}
	}
}
