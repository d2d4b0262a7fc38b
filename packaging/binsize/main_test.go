package main

import (
	"os"
	"strings"
	"testing"
)

func TestPackagePath(t *testing.T) {
	for name, want := range map[string]string{
		"main.main":                                                        "main",
		"net/http.(*Server).Serve":                                         "net/http",
		"slices.SortFunc[go.shape.string]":                                 "slices",
		"github.com/spf13/cobra.(*Command).Execute":                        "github.com/spf13/cobra",
		"vendor/golang.org/x/net/idna.init.0":                              "vendor/golang.org/x/net/idna",
		"slices.partitionCmpFunc[go.shape.struct { net/http.key string }]": "slices",
		"go:buildid": "buildid",
	} {
		if got := packagePath(name); got != want {
			t.Errorf("packagePath(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestGrouped(t *testing.T) {
	for n, want := range map[uint64]string{0: "0", 999: "999", 1000: "1,000", 15_000_000: "15,000,000"} {
		if got := grouped(n); got != want {
			t.Errorf("grouped(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestMeasuresItself reads the test binary, a Go ELF binary like ironbus.
func TestMeasuresItself(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, err := measure(self)
	if err != nil {
		if strings.Contains(err.Error(), "ELF") {
			t.Skipf("not an ELF platform: %v", err)
		}
		t.Fatal(err)
	}
	if r.code == 0 || len(r.packages) == 0 || r.packages[0].bytes == 0 {
		t.Fatalf("no code found: %+v", r)
	}
	var out strings.Builder
	if r.print(&out, 1, "", 3) || !strings.Contains(out.String(), "OVER BUDGET") {
		t.Fatalf("a 1-byte budget was not exceeded:\n%s", out.String())
	}
}
