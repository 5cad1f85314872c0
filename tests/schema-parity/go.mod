// schema-parity (main.go): our CRDs against OpenKruise v1.9.0's. A test tool, never part
// of the product; run.sh fetches the pinned OpenKruise module and runs it (make schema-parity).
module kruise-rs/schema-parity

go 1.24.0

require sigs.k8s.io/yaml v1.4.0
