//go:build tools

// Package tools pins the upstream e2e suite and every package its test main imports
// (test/e2e/e2e_test.go), so `go mod tidy` keeps them and go.sum covers the build.
package tools

import (
	_ "github.com/openkruise/kruise/apis"
	_ "github.com/openkruise/kruise/test/e2e"
	_ "github.com/openkruise/kruise/test/e2e/apps/v1alpha1"
	_ "github.com/openkruise/kruise/test/e2e/apps/v1beta1"
	_ "github.com/openkruise/kruise/test/e2e/framework/common"
	_ "github.com/openkruise/kruise/test/e2e/policy/v1alpha1"
	_ "k8s.io/client-go/kubernetes/scheme"
	_ "k8s.io/klog/v2"
)
