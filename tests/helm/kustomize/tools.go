//go:build tools

// Package tools pins the kustomize command this module builds, so `go mod tidy` keeps it.
package tools

import (
	_ "sigs.k8s.io/kustomize/kustomize/v5"
)
