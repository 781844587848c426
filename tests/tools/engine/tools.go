//go:build tools

// Package engine names the Pulumi CLI's main package and the package whose Version variable the build sets, so
// that `go mod tidy` keeps every module they need in go.sum and requires pkg/v3 and sdk/v3 directly, at one
// version. scripts/build-engine builds github.com/pulumi/pulumi/pkg/v3/cmd/pulumi from this module.
package engine

import (
	_ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
	_ "github.com/pulumi/pulumi/sdk/v3/go/common/version"
)
