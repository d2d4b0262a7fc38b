package main

import (
	"debug/buildinfo"
	"debug/elf"
	"debug/gosym"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"
)

// Exit codes.
const (
	exitOK         = 0
	exitOverBudget = 1
	exitUsage      = 2
)

func main() {
	budget := flag.Int64("budget", 15_000_000, "the most bytes the binary may have")
	later := flag.String("later", "", "a note on the budget to come, printed beside it")
	top := flag.Int("top", 20, "how many packages to list")
	flag.Parse()
	if flag.NArg() != 1 || *budget <= 0 || *top < 0 {
		fmt.Fprintln(os.Stderr, "usage: binsize [-budget BYTES] [-later NOTE] [-top N] BINARY")
		os.Exit(exitUsage)
	}
	report, err := measure(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "binsize:", err)
		os.Exit(exitUsage)
	}
	if !report.print(os.Stdout, *budget, *later, *top) {
		os.Exit(exitOverBudget)
	}
	os.Exit(exitOK)
}

// packageCode is the machine code of one package's functions.
type packageCode struct {
	path  string
	bytes uint64
}

// section is one ELF section's size in the file.
type section struct {
	name  string
	bytes uint64
}

type report struct {
	path     string
	bytes    int64
	sections []section
	packages []packageCode // largest first
	modules  []packageCode // the same, summed by module; "std" for the standard library
	code     uint64        // all functions
}

// measure reads the binary at path.
func measure(path string) (*report, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	file, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (want a Linux ELF binary)", path, err)
	}
	defer file.Close()
	r := &report{path: path, bytes: info.Size()}
	for _, s := range file.Sections {
		if s.Type != elf.SHT_NOBITS && s.Size > 0 && s.Name != "" {
			r.sections = append(r.sections, section{s.Name, s.Size})
		}
	}
	slices.SortFunc(r.sections, func(a, b section) int { return compareBytes(a.bytes, b.bytes) })
	table, err := functionTable(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sums := make(map[string]uint64)
	for _, function := range table.Funcs {
		size := function.End - function.Entry
		sums[packagePath(function.Name)] += size
		r.code += size
	}
	build, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	modules := make(map[string]uint64)
	for path, bytes := range sums {
		r.packages = append(r.packages, packageCode{path, bytes})
		modules[modulePath(path, build)] += bytes
	}
	for path, bytes := range modules {
		r.modules = append(r.modules, packageCode{path, bytes})
	}
	sortLargestFirst(r.packages)
	sortLargestFirst(r.modules)
	return r, nil
}

func sortLargestFirst(list []packageCode) {
	slices.SortFunc(list, func(a, b packageCode) int {
		if c := compareBytes(a.bytes, b.bytes); c != 0 {
			return c
		}
		return strings.Compare(a.path, b.path)
	})
}

// modulePath returns the module that provides the package: the longest
// module path of the build that prefixes it, the main module for package
// main, and "std" for the rest (the standard library, its vendored
// golang.org/x packages and the compiler's generated code).
func modulePath(pkg string, build *buildinfo.BuildInfo) string {
	if pkg == "main" {
		return build.Main.Path
	}
	best := "std"
	for _, module := range append([]*debug.Module{&build.Main}, build.Deps...) {
		if (pkg == module.Path || strings.HasPrefix(pkg, module.Path+"/")) && (best == "std" || len(module.Path) > len(best)) {
			best = module.Path
		}
	}
	return best
}

// functionTable decodes .gopclntab, which locates itself in .text.
func functionTable(file *elf.File) (*gosym.Table, error) {
	pclntab, text := file.Section(".gopclntab"), file.Section(".text")
	if pclntab == nil || text == nil {
		return nil, errors.New("no .gopclntab or .text section: not a Go binary")
	}
	data, err := pclntab.Data()
	if err != nil {
		return nil, fmt.Errorf("reading .gopclntab: %w", err)
	}
	return gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
}

// compareBytes orders larger first.
func compareBytes(a, b uint64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// packagePath returns the import path of a function's package: the name
// up to the first dot after the last slash, type arguments and receiver
// aside ("slices.SortFunc[go.shape.string]" is slices,
// "net/http.(*Server).Serve" is net/http). A generic instantiation counts
// toward the generic function's package.
func packagePath(name string) string {
	if bracket := strings.IndexByte(name, '['); bracket >= 0 {
		name = name[:bracket]
	}
	name = strings.TrimPrefix(name, "go:")
	slash := strings.LastIndexByte(name, '/')
	if dot := strings.IndexByte(name[slash+1:], '.'); dot >= 0 {
		return name[:slash+1+dot]
	}
	return name
}

// print writes the report and says whether the binary is within budget.
func (r *report) print(w io.Writer, budget int64, later string, top int) bool {
	fmt.Fprintf(w, "%s: %s bytes (%.2f MB, %.2f MiB)\n", r.path, grouped(uint64(r.bytes)), float64(r.bytes)/1e6, float64(r.bytes)/(1<<20))
	within := r.bytes <= budget
	verdict := fmt.Sprintf("within budget, %s bytes to spare", grouped(uint64(budget-r.bytes)))
	if !within {
		verdict = fmt.Sprintf("OVER BUDGET by %s bytes", grouped(uint64(r.bytes-budget)))
	}
	fmt.Fprintf(w, "budget %s bytes: %s\n", grouped(uint64(budget)), verdict)
	if later != "" {
		fmt.Fprintln(w, later)
	}
	fmt.Fprintln(w, "\nsections (bytes in the file):")
	for _, s := range r.sections {
		fmt.Fprintf(w, "  %12s  %s\n", grouped(s.bytes), s.name)
	}
	fmt.Fprintf(w, "\nlargest packages by machine code (all functions: %s bytes; each also costs\nabout 3/4 of its code again in .gopclntab, plus its types, strings and data):\n", grouped(r.code))
	r.printCode(w, r.packages, top)
	fmt.Fprintln(w, "\nlargest modules by machine code:")
	r.printCode(w, r.modules, top)
	return within
}

func (r *report) printCode(w io.Writer, list []packageCode, top int) {
	for _, p := range list[:min(top, len(list))] {
		fmt.Fprintf(w, "  %12s  %5.1f%%  %s\n", grouped(p.bytes), 100*float64(p.bytes)/float64(r.code), p.path)
	}
}

// grouped writes n with thousands separators: 15,000,000.
func grouped(n uint64) string {
	digits := fmt.Sprint(n)
	var out strings.Builder
	for i, digit := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			out.WriteByte(',')
		}
		out.WriteRune(digit)
	}
	return out.String()
}
