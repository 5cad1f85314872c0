// Command parity writes what upstream OpenKruise v1.9.0 computes for a set of input
// objects, so the Rust unit tests can assert that ours computes the same (a test tool,
// run by hand: `make parity-fixtures`; never part of the product or of `make test`).
//
//	parity table    > crates/kruise-workload/src/revision/gotypes.json
//	parity fixtures < tests/parity/inputs.json > tests/parity/expected.json
//
// `table` prints, for every Go struct reachable from a SidecarSet container, a Pod
// template and a UnitedDeployment's subset template (the k8s.io/api version upstream's
// go.mod pins), its JSON fields in
// declaration order with their omitempty flag and type: what encoding/json needs to
// write a value of it. Rust uses the table to write our values the way Go would.
//
// `fixtures` decodes each input object into upstream's type with encoding/json (as an
// informer does), applies upstream's defaulting as its mutating webhook would before the
// object is stored, and records the stored object and what upstream's own functions
// compute from it: the SidecarSet hashes (sidecarcontrol.SidecarSetHash and
// SidecarSetHashWithoutImage), and the ControllerRevision of a CloneSet, an Advanced
// StatefulSet, an Advanced DaemonSet template and a UnitedDeployment's subset template
// (name, controller-revision-hash label, data bytes).
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"
	_ "unsafe" // go:linkname, to call upstream's unexported revision functions

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubecontroller "k8s.io/kubernetes/pkg/controller"
	"k8s.io/kubernetes/pkg/controller/history"

	"github.com/openkruise/kruise/apis/apps/defaults"
	appsv1alpha1 "github.com/openkruise/kruise/apis/apps/v1alpha1"
	appsv1beta1 "github.com/openkruise/kruise/apis/apps/v1beta1"
	"github.com/openkruise/kruise/pkg/control/sidecarcontrol"
	clonesetrevision "github.com/openkruise/kruise/pkg/controller/cloneset/revision"
	_ "github.com/openkruise/kruise/pkg/controller/daemonset"
	_ "github.com/openkruise/kruise/pkg/controller/statefulset"
	_ "github.com/openkruise/kruise/pkg/controller/uniteddeployment"
)

// Upstream's own (unexported) revision functions, called as they are.

//go:linkname statefulSetNewRevision github.com/openkruise/kruise/pkg/controller/statefulset.newRevision
func statefulSetNewRevision(set *appsv1beta1.StatefulSet, revision int64, collisionCount *int32) (*appsv1.ControllerRevision, error)

//go:linkname daemonSetGetPatch github.com/openkruise/kruise/pkg/controller/daemonset.getPatch
func daemonSetGetPatch(ds *appsv1beta1.DaemonSet) ([]byte, error)

//go:linkname unitedDeploymentGetPatch github.com/openkruise/kruise/pkg/controller/uniteddeployment.getUnitedDeploymentPatch
func unitedDeploymentGetPatch(ud *appsv1beta1.UnitedDeployment) ([]byte, error)

func main() {
	// As upstream's main.go: its revision codecs encode through client-go's scheme.
	utilruntime.Must(appsv1alpha1.AddToScheme(clientgoscheme.Scheme))
	utilruntime.Must(appsv1beta1.AddToScheme(clientgoscheme.Scheme))
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: parity table|fixtures")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "table":
		err = writeTable(os.Stdout)
	case "fixtures":
		err = writeFixtures(os.Stdin, os.Stdout)
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "parity:", err)
		os.Exit(1)
	}
}

// ---- table ----

// A field of a Go struct as encoding/json sees it: either a named field or an embedded
// struct whose fields are promoted (written in place).
type field struct {
	JSON      string `json:"json,omitempty"`
	OmitEmpty bool   `json:"omitempty,omitempty"`
	Type      string `json:"type,omitempty"`
	Inline    string `json:"inline,omitempty"`
}

// Types are named by a short string: a scalar (string, bool, int, uint, float, any), a
// type with its own MarshalJSON (quantity, intorstring, time, rawjson), a struct
// ("core/v1.Container"), or a pointer, slice or map of one ("*T", "[]T", "map[]T").
type table struct {
	Roots   map[string]string       `json:"roots"`
	Structs map[string][]field      `json:"structs"`
	seen    map[reflect.Type]bool   `json:"-"`
	todo    []reflect.Type          `json:"-"`
	names   map[reflect.Type]string `json:"-"`
	special map[reflect.Type]string `json:"-"`
}

var pkgShort = []struct{ prefix, short string }{
	{"k8s.io/api/", ""},
	{"k8s.io/apimachinery/pkg/apis/", ""},
	{"k8s.io/apimachinery/pkg/", ""},
	{"github.com/openkruise/kruise/apis/", "kruise/"},
}

func structName(t reflect.Type) string {
	p := t.PkgPath()
	for _, s := range pkgShort {
		if strings.HasPrefix(p, s.prefix) {
			p = s.short + strings.TrimPrefix(p, s.prefix)
			break
		}
	}
	return p + "." + t.Name()
}

func (tb *table) typeName(t reflect.Type) string {
	if s, ok := tb.special[t]; ok {
		return s
	}
	marshaler := reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	if t.Kind() != reflect.Pointer && (t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler)) {
		panic(fmt.Sprintf("type %v has its own MarshalJSON and no entry in the table", t))
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "int"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "uint"
	case reflect.Float32, reflect.Float64:
		return "float"
	case reflect.Interface:
		return "any"
	case reflect.Pointer:
		return "*" + tb.typeName(t.Elem())
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			panic(fmt.Sprintf("[]byte (%v) is not in the table", t))
		}
		return "[]" + tb.typeName(t.Elem())
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			panic(fmt.Sprintf("map key %v is not a string", t))
		}
		return "map[]" + tb.typeName(t.Elem())
	case reflect.Struct:
		if !tb.seen[t] {
			tb.seen[t] = true
			tb.todo = append(tb.todo, t)
		}
		return structName(t)
	}
	panic(fmt.Sprintf("kind %v (%v) is not in the table", t.Kind(), t))
}

func (tb *table) describe(t reflect.Type) []field {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",string,") {
			panic(fmt.Sprintf("%v.%s: the ,string option is not in the table", t, f.Name))
		}
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				panic(fmt.Sprintf("%v.%s: embedded pointer", t, f.Name))
			}
			if ft.Kind() == reflect.Struct {
				if _, special := tb.special[ft]; !special {
					tb.typeName(ft)
					out = append(out, field{Inline: structName(ft)})
					continue
				}
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, field{
			JSON:      name,
			OmitEmpty: strings.Contains(","+opts+",", ",omitempty,"),
			Type:      tb.typeName(ft),
		})
	}
	return out
}

func writeTable(w io.Writer) error {
	tb := &table{
		Roots:   map[string]string{},
		Structs: map[string][]field{},
		seen:    map[reflect.Type]bool{},
		special: map[reflect.Type]string{
			reflect.TypeOf(resource.Quantity{}):  "quantity",
			reflect.TypeOf(intstr.IntOrString{}): "intorstring",
			reflect.TypeOf(metav1.Time{}):        "time",
			reflect.TypeOf(metav1.FieldsV1{}):    "rawjson",
		},
	}
	tb.Roots["SidecarContainer"] = tb.typeName(reflect.TypeOf(appsv1alpha1.SidecarContainer{}))
	tb.Roots["PodTemplateSpec"] = tb.typeName(reflect.TypeOf(corev1.PodTemplateSpec{}))
	// The UnitedDeployment revision data (uniteddeployment/revision.go
	// getUnitedDeploymentPatch) is the v1beta1 spec.template as encoding/json writes it.
	tb.Roots["UnitedDeploymentSubsetTemplate"] = tb.typeName(reflect.TypeOf(appsv1beta1.SubsetTemplate{}))
	for len(tb.todo) > 0 {
		t := tb.todo[0]
		tb.todo = tb.todo[1:]
		tb.Structs[structName(t)] = tb.describe(t)
	}
	// One struct a line: small diffs when the pinned k8s.io/api version changes.
	var buf bytes.Buffer
	buf.WriteString("{\"source\":\"tests/parity (go run . table): Go struct field order of k8s.io/api v0.32.10 and openkruise/kruise v1.9.0\",\n\"roots\":")
	roots, _ := json.Marshal(tb.Roots)
	buf.Write(roots)
	buf.WriteString(",\n\"structs\":{")
	names := make([]string, 0, len(tb.Structs))
	for n := range tb.Structs {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		if i > 0 {
			buf.WriteString(",")
		}
		k, _ := json.Marshal(n)
		v, _ := json.Marshal(tb.Structs[n])
		fmt.Fprintf(&buf, "\n%s:%s", k, v)
	}
	buf.WriteString("\n}}\n")
	_, err := w.Write(buf.Bytes())
	return err
}

// ---- fixtures ----

// The input: objects of each kind, as a user would apply them.
type inputs struct {
	SidecarSets  []json.RawMessage `json:"sidecarSets"`
	CloneSets    []json.RawMessage `json:"cloneSets"`
	StatefulSets []json.RawMessage `json:"statefulSets"`
	DaemonSets   []json.RawMessage `json:"daemonSets"`
	// Applied as apps.kruise.io/v1alpha1.
	UnitedDeployments []json.RawMessage `json:"unitedDeployments"`
	Quantities        []string          `json:"quantities"`
}

type sidecarSetOut struct {
	Name string `json:"name"`
	// The object as upstream's mutating webhook stores it (defaulted, hashes annotated).
	Stored json.RawMessage `json:"stored"`
	// The hashes of the input as applied (no defaulting): what the encoding alone gives.
	RawHash             string `json:"rawHash"`
	RawHashWithoutImage string `json:"rawHashWithoutImage"`
	// The hashes of the defaulted object: the annotations upstream's webhook writes.
	Hash             string `json:"hash"`
	HashWithoutImage string `json:"hashWithoutImage"`
}

type revisionOut struct {
	Name           string          `json:"name"`
	CollisionCount *int32          `json:"collisionCount,omitempty"`
	Stored         json.RawMessage `json:"stored"`
	Revision       string          `json:"revision"`
	Hash           string          `json:"hash"`
	// The ControllerRevision data, byte for byte (a JSON string of the bytes).
	Data string `json:"data"`
	// The same for the object as applied, not defaulted (stored by a webhook that did
	// not default it the way upstream's does): what upstream computes when it reads it.
	RawRevision string `json:"rawRevision"`
	RawData     string `json:"rawData"`
}

type outputs struct {
	Source       string          `json:"source"`
	SidecarSets  []sidecarSetOut `json:"sidecarSets"`
	CloneSets    []revisionOut   `json:"cloneSets"`
	StatefulSets []revisionOut   `json:"statefulSets"`
	DaemonSets   []revisionOut   `json:"daemonSets"`
	// Stored is the v1beta1 object (the storage version) the controller reads.
	UnitedDeployments []revisionOut `json:"unitedDeployments"`
	Quantities        []quantityOut `json:"quantities"`
}

// A quantity as Go writes it once decoded, and after the container defaults
// (SetDefaults_ResourceList: RoundUp to milli). Empty when Go rejects it.
type quantityOut struct {
	In        string `json:"in"`
	Canonical string `json:"canonical"`
	Milli     string `json:"milli"`
}

// unitedDeploymentRevision is what uniteddeployment/revision.go newRevision names the
// revision of ud and stores in it: getUnitedDeploymentPatch's bytes, hashed by
// history.NewControllerRevision with the collision count constructUnitedDeploymentRevisions
// passes (never nil, 0 when unset).
func unitedDeploymentRevision(ud *appsv1beta1.UnitedDeployment) (string, []byte, error) {
	patch, err := unitedDeploymentGetPatch(ud)
	if err != nil {
		return "", nil, err
	}
	cc := int32(0)
	if ud.Status.CollisionCount != nil {
		cc = *ud.Status.CollisionCount
	}
	gvk := appsv1beta1.SchemeGroupVersion.WithKind("UnitedDeployment")
	cr, err := history.NewControllerRevision(ud, gvk, nil, runtime.RawExtension{Raw: patch}, 1, &cc)
	if err != nil {
		return "", nil, err
	}
	return cr.Name, cr.Data.Raw, nil
}

// hashOf is the hash part of a revision name (the controller-revision-hash label of
// the Pods at that revision).
func hashOf(name string) string {
	return name[strings.LastIndex(name, "-")+1:]
}

// stored is what the apiserver keeps after upstream's webhook: the defaulted object
// marshaled by encoding/json; informers decode it again.
func stored(obj interface{}, into interface{}) (json.RawMessage, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return raw, json.Unmarshal(raw, into)
}

func writeFixtures(r io.Reader, w io.Writer) error {
	var in inputs
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return fmt.Errorf("inputs: %w", err)
	}
	out := outputs{Source: "tests/parity (go run . fixtures < inputs.json): openkruise/kruise v1.9.0"}

	for _, raw := range in.SidecarSets {
		var applied appsv1alpha1.SidecarSet
		if err := json.Unmarshal(raw, &applied); err != nil {
			return err
		}
		o := sidecarSetOut{Name: applied.Name}
		var err error
		if o.RawHash, err = sidecarcontrol.SidecarSetHash(&applied); err != nil {
			return err
		}
		if o.RawHashWithoutImage, err = sidecarcontrol.SidecarSetHashWithoutImage(&applied); err != nil {
			return err
		}
		defaulted := applied.DeepCopy()
		defaults.SetDefaultsSidecarSet(defaulted)
		if err := defaults.SetHashSidecarSet(defaulted); err != nil {
			return err
		}
		var informer appsv1alpha1.SidecarSet
		if o.Stored, err = stored(defaulted, &informer); err != nil {
			return err
		}
		// The controller reads the hashes of what it decoded from the store.
		if o.Hash, err = sidecarcontrol.SidecarSetHash(&informer); err != nil {
			return err
		}
		if o.HashWithoutImage, err = sidecarcontrol.SidecarSetHashWithoutImage(&informer); err != nil {
			return err
		}
		if o.Hash != informer.Annotations[sidecarcontrol.SidecarSetHashAnnotation] ||
			o.HashWithoutImage != informer.Annotations[sidecarcontrol.SidecarSetHashWithoutImageAnnotation] {
			return fmt.Errorf("sidecarset %s: the webhook's hashes differ from the stored object's", o.Name)
		}
		out.SidecarSets = append(out.SidecarSets, o)
	}

	for _, raw := range in.CloneSets {
		// Stored as v1alpha1 (the version applied, defaulted by upstream's v1alpha1
		// webhook); upstream's controller reads it as v1beta1, whose template is the same.
		var cs appsv1alpha1.CloneSet
		if err := json.Unmarshal(raw, &cs); err != nil {
			return err
		}
		defaults.SetDefaultsCloneSet(&cs, true)
		var informer appsv1beta1.CloneSet
		st, err := stored(&cs, &informer)
		if err != nil {
			return err
		}
		// The CloneSet controller passes a collision count that is never nil (0 when unset).
		cc := int32(0)
		if informer.Status.CollisionCount != nil {
			cc = *informer.Status.CollisionCount
		}
		cr, err := clonesetrevision.NewRevisionControl().NewRevision(&informer, 1, &cc)
		if err != nil {
			return err
		}
		var applied appsv1beta1.CloneSet
		if err := json.Unmarshal(raw, &applied); err != nil {
			return err
		}
		rawCr, err := clonesetrevision.NewRevisionControl().NewRevision(&applied, 1, &cc)
		if err != nil {
			return err
		}
		out.CloneSets = append(out.CloneSets, revisionOut{
			Name: informer.Name, CollisionCount: informer.Status.CollisionCount, Stored: st,
			Revision: cr.Name, Hash: hashOf(cr.Name), Data: string(cr.Data.Raw),
			RawRevision: rawCr.Name, RawData: string(rawCr.Data.Raw),
		})
	}

	for _, raw := range in.StatefulSets {
		var set appsv1beta1.StatefulSet
		if err := json.Unmarshal(raw, &set); err != nil {
			return err
		}
		defaults.SetDefaultsStatefulSet(&set, true)
		var informer appsv1beta1.StatefulSet
		st, err := stored(&set, &informer)
		if err != nil {
			return err
		}
		cc := int32(0)
		if informer.Status.CollisionCount != nil {
			cc = *informer.Status.CollisionCount
		}
		cr, err := statefulSetNewRevision(&informer, 1, &cc)
		if err != nil {
			return err
		}
		var applied appsv1beta1.StatefulSet
		if err := json.Unmarshal(raw, &applied); err != nil {
			return err
		}
		rawCr, err := statefulSetNewRevision(&applied, 1, &cc)
		if err != nil {
			return err
		}
		out.StatefulSets = append(out.StatefulSets, revisionOut{
			Name: informer.Name, CollisionCount: informer.Status.CollisionCount, Stored: st,
			Revision: cr.Name, Hash: hashOf(cr.Name), Data: string(cr.Data.Raw),
			RawRevision: rawCr.Name, RawData: string(rawCr.Data.Raw),
		})
	}

	for _, raw := range in.DaemonSets {
		var ds appsv1alpha1.DaemonSet
		if err := json.Unmarshal(raw, &ds); err != nil {
			return err
		}
		defaults.SetDefaultsDaemonSet(&ds)
		var informer appsv1beta1.DaemonSet
		st, err := stored(&ds, &informer)
		if err != nil {
			return err
		}
		// As daemonset_history.go snapshot(): data from getPatch, name from ComputeHash
		// (the collision count as it is, nil included).
		patch, err := daemonSetGetPatch(&informer)
		if err != nil {
			return err
		}
		hash := kubecontroller.ComputeHash(&informer.Spec.Template, informer.Status.CollisionCount)
		var applied appsv1beta1.DaemonSet
		if err := json.Unmarshal(raw, &applied); err != nil {
			return err
		}
		rawPatch, err := daemonSetGetPatch(&applied)
		if err != nil {
			return err
		}
		rawHash := kubecontroller.ComputeHash(&applied.Spec.Template, applied.Status.CollisionCount)
		out.DaemonSets = append(out.DaemonSets, revisionOut{
			Name: informer.Name, CollisionCount: informer.Status.CollisionCount, Stored: st,
			Revision: informer.Name + "-" + hash, Hash: hash, Data: string(patch),
			RawRevision: applied.Name + "-" + rawHash, RawData: string(rawPatch),
		})
	}

	for _, raw := range in.UnitedDeployments {
		// Applied as v1alpha1 and defaulted by upstream's v1alpha1 webhook, converted to
		// v1beta1 (the storage version, apis/apps/v1alpha1/uniteddeployment_conversion.go)
		// and read by the controller as v1beta1.
		var applied appsv1alpha1.UnitedDeployment
		if err := json.Unmarshal(raw, &applied); err != nil {
			return err
		}
		ud := applied.DeepCopy()
		defaults.SetDefaultsUnitedDeployment(ud, true)
		var converted appsv1beta1.UnitedDeployment
		if err := ud.ConvertTo(&converted); err != nil {
			return err
		}
		var informer appsv1beta1.UnitedDeployment
		st, err := stored(&converted, &informer)
		if err != nil {
			return err
		}
		name, data, err := unitedDeploymentRevision(&informer)
		if err != nil {
			return err
		}
		var rawConverted appsv1beta1.UnitedDeployment
		if err := applied.ConvertTo(&rawConverted); err != nil {
			return err
		}
		rawName, rawData, err := unitedDeploymentRevision(&rawConverted)
		if err != nil {
			return err
		}
		out.UnitedDeployments = append(out.UnitedDeployments, revisionOut{
			Name: informer.Name, CollisionCount: informer.Status.CollisionCount, Stored: st,
			Revision: name, Hash: hashOf(name), Data: string(data),
			RawRevision: rawName, RawData: string(rawData),
		})
	}

	for _, in := range in.Quantities {
		o := quantityOut{In: in}
		var q resource.Quantity
		raw, _ := json.Marshal(in)
		if err := json.Unmarshal(raw, &q); err == nil {
			c, _ := json.Marshal(q)
			_ = json.Unmarshal(c, &o.Canonical)
			q.RoundUp(-3)
			m, _ := json.Marshal(q)
			_ = json.Unmarshal(m, &o.Milli)
		}
		out.Quantities = append(out.Quantities, o)
	}

	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(out)
}
