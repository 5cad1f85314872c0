//go:build tools

// Package tools pins the helm command this module builds, so `go mod tidy` keeps it.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
