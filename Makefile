# kruise-rs: OpenKruise's controllers as small Rust binaries.
#
#   make run     local cluster + every controller + examples, in the foreground (Ctrl-C stops)
#   make test    lint, unit tests, e2e tests on the local cluster (installs what it needs)
#
# The rest: up / down (run in the background), cluster / cluster-down, crds, lint, unit,
# e2e, test-versions, bench, bench-compare, conformance, conformance-1.32, fuzz, chaos, images, krew, deploy; with the real node
# (root; make test adds it when run as root): up-real, e2e-real, deploy-local. Everything
# lands under .local/ (kubeconfig, logs).

SHELL := /bin/bash
.DEFAULT_GOAL := help
KUBECONFIG_LOCAL := $(CURDIR)/.local/kubeconfig
E2E_THREADS ?= 6

.PHONY: help run up down cluster cluster-down crds crds-check lint unit e2e test bench conformance images deploy deps
.PHONY: up-real e2e-real deploy-local undeploy-local bench-compare fuzz helm-test
.PHONY: parity-fixtures
.PHONY: chaos migration-test schema-parity test-versions conformance-1.32
.PHONY: krew

help:
	@sed -n '1,10p' Makefile | sed 's/^# \{0,1\}//'

deps: ## tools the build needs, installed if missing (idempotent)
	@tests/deps.sh

cluster: deps ## start the local control plane (no-op when up)
	@tests/cluster/cluster.sh up

cluster-down:
	@tests/cluster/cluster.sh down

up: cluster ## cluster + CRDs + controllers + examples, in the background
	@tests/cluster/controllers.sh up
	@tests/examples.sh apply
	@echo
	@echo "Local cluster ready. Use it with:"
	@echo "  export KUBECONFIG=$(KUBECONFIG_LOCAL)"
	@echo "  export PATH=$$(tests/cluster/cluster.sh bin):\$$PATH   # kubectl v1.33"
	@echo "  kubectl get nodes,crd; kubectl get cloneset -A"
	@echo "Controller logs: .local/logs/<binary>.log. Stop with: make down"

down: ## stop controllers and the cluster
	@tests/cluster/controllers.sh down
	@tests/cluster/cluster.sh down

run: up ## make up, then stream logs until Ctrl-C, then make down
	@trap '$(MAKE) --no-print-directory down' EXIT; \
	 echo "Streaming controller logs (Ctrl-C stops everything)"; \
	 tail -n 0 -F .local/logs/*-ctl.log 2>/dev/null || sleep infinity

crds: ## regenerate deploy/crds from the Rust types
	cargo run --quiet -p kruise-api --bin crdgen -- deploy/crds

lint: deps
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --quiet -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
	$$(tests/helm/build.sh) lint --strict deploy/helm/kruise-rs
	@tests/schema-parity/run.sh

schema-parity: ## our CRDs against OpenKruise v1.9.0's, field by field (tests/schema-parity; part of lint)
	@tests/schema-parity/run.sh

unit: deps ## unit and property tests (no cluster)
	cargo test --workspace --exclude kruise-e2e --quiet

e2e: cluster ## end-to-end tests against the local cluster
	KUBECONFIG=$(KUBECONFIG_LOCAL) cargo test -p kruise-e2e --quiet -- --test-threads=$(E2E_THREADS) --skip conversion::
	KUBECONFIG=$(KUBECONFIG_LOCAL) cargo test -p kruise-e2e --quiet -- --test-threads=1 conversion::

test: deps ## lint + unit + e2e; the cluster binaries build meanwhile
	@tests/test.sh

KRUISE_TEST_VERSIONS ?= 1.32 1.37
test-versions: deps ## the kwok e2e suite on other Kubernetes versions, one cluster each, built and cached per version (not part of make test): [KRUISE_TEST_VERSIONS="1.32 1.37"]; results in target/versions/<version>.txt
	@KRUISE_TEST_VERSIONS="$(KRUISE_TEST_VERSIONS)" tests/versions.sh

bench: cluster ## benchmarks on the local cluster (not part of make test); results in target/bench/
	cargo build --release --quiet --bins
	KUBECONFIG=$(KUBECONFIG_LOCAL) cargo test -p kruise-e2e --quiet -- --ignored --test-threads=1 --nocapture bench_

bench-compare: deps ## ours vs upstream kruise-manager v1.9.0, side by side on a second cluster of its own (not part of make test): BENCH_PODS=1000 [BENCH_INPLACE=0 BENCH_QPS=30 BENCH_BURST=50 BENCH_WORKERS=3 BENCH_PERF=1]; results in target/bench/compare.json
	cargo build --release --quiet -p cloneset-ctl -p bench-floor
	@if [ -n "$(BENCH_PERF)" ] && [ "$(BENCH_PERF)" != 0 ]; then cargo build --profile profiling --quiet -p cloneset-ctl; fi
	@tests/bench/compare.sh

migration-test: deps ## a live switch from upstream kruise-manager v1.9.0 to ours and back, on a cluster of its own (not part of make test): 0 Pod writes, no Pod recreated, no new revision, rollouts after each switch; results in target/migration/summary.json
	@tests/migration/run.sh

parity-fixtures: ## regenerate tests/parity/expected.json and the Go struct table from upstream v1.9.0's own functions (needs Go; not part of make test)
	@tests/parity/generate.sh

SUITE ?= all
conformance: cluster ## OpenKruise v1.9.0's own e2e suite on the local cluster (not part of make test): SUITE=cloneset|sidecarset|statefulset|daemonset|broadcastjob|advancedcronjob|all [FOCUS=regex]; results in target/conformance/
	@tests/conformance/run.sh $(SUITE)

SUITE_1_32 ?= inplacevpa
conformance-1.32: deps ## the e2e specs that need Kubernetes 1.32's in-place Pod resize (tests/conformance/k8s-1.32.txt) with the rest of their suite, on a 1.32 cluster of its own with real-0 and the alpha gate InPlacePodVerticalScaling (root; the default cluster down; not part of make test): [SUITE_1_32=inplacevpa]; results in target/conformance-1.32/
	@tests/deps.sh --real-node
	@tests/conformance/on-1.32.sh $(SUITE_1_32)

FUZZ_SECONDS ?= 60
fuzz: ## every fuzz target (cargo-fuzz, nightly; installed if missing) for FUZZ_SECONDS each (not part of make test): [FUZZ_SECONDS=60] [FUZZ_TARGET=name] [FUZZ_JOBS=1]; results in target/fuzz/summary.json
	@FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_TARGET=$(FUZZ_TARGET) FUZZ_JOBS=$(FUZZ_JOBS) fuzz/run.sh

CHAOS_PODS ?= 1000
CHAOS_PROFILE ?= debug
CHAOS_BINS := $(shell grep -v '^\#' tests/cluster/controllers.txt) chaos-proxy
chaos: deps ## controllers shot at (leader kill -9, apiserver restart, etcd compaction, a malformed object, webhook down, 5 QPS, an upgrade from the previous version mid-rollout) on a cluster of its own (not part of make test): [CHAOS_PODS=1000] [SCENARIOS="takeover leader-cloneset ..."]; results in target/chaos/*.json
	cargo build --quiet $(if $(filter release,$(CHAOS_PROFILE)),--release) $(addprefix --bin ,$(CHAOS_BINS))
	@CHAOS_PODS=$(CHAOS_PODS) CHAOS_PROFILE=$(CHAOS_PROFILE) tests/chaos/run.sh $(SCENARIOS)

images: ## one image per controller binary, FROM scratch, nothing pulled (a Docker engine, else buildah: installed if missing)
	@command -v buildah >/dev/null || docker info >/dev/null 2>&1 || tests/deps.sh --images
	@tests/images.sh

krew: ## kubectl-kruise as a static release binary, packed reproducibly with LICENSE into target/krew/kubectl-kruise-linux-amd64.tar.gz, and its krew manifest deploy/krew/kruise.yaml (not part of make test)
	@tests/krew/build.sh

helm-test: deps ## the Helm chart deploy/helm/kruise-rs installed, upgraded and uninstalled on the real node with every controller (make up-real first; make test runs it with cloneset, imagepulljob and the agent) [NO_BUILD=1]
	@tests/helm/install.sh

up-real: deps ## the local cluster with the real node real-0 (kubelet + containerd + registries; root; make test starts it too when run as root)
	@tests/deps.sh --real-node
	@KRUISE_REAL_NODE=1 tests/cluster/cluster.sh up

e2e-real: ## the real node's e2e tests (tests/e2e/tests/realnode.rs, imagepull.rs's real_node_*) on the cluster of make up-real
	KUBECONFIG=$(KUBECONFIG_LOCAL) KRUISE_E2E_REAL_NODE=1 cargo test -p kruise-e2e --quiet -- --test-threads=3 realnode:: imagepull::real_node

deploy-local: ## make images, push them to the real node's registry, deploy kustomize/overlays/all onto real-0 [OVERLAY=cloneset]
	@OVERLAY=$(OVERLAY) tests/deploy-local.sh

undeploy-local: ## stop what deploy-local deployed (Deployments, the agent's DaemonSet)
	@tests/deploy-local.sh delete

OVERLAY ?= all
KUBECTL ?= kubectl
deploy: ## kustomize to the cluster in $$KUBECONFIG: OVERLAY=all (default) or one controller, e.g. OVERLAY=cloneset
	$(KUBECTL) apply -k kustomize/overlays/$(OVERLAY)
