package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/format"
)

const versionSchema = "ironbus.cli.version.v1"

// versionOutput is the --json form of `ironbus version`.
type versionOutput struct {
	Schema    string         `json:"schema"`
	Version   string         `json:"version"`
	GoVersion string         `json:"go_version"`
	OS        string         `json:"os"`
	Arch      string         `json:"arch"`
	Formats   formatVersions `json:"formats"`
	Backends  []backendState `json:"network_backends"`
}

// backendState says whether a network backend runs on this system and, if
// not, why: "why did serve not pick io_uring?" is answered here.
type backendState struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
}

func probeBackends() []backendState {
	var states []backendState
	for _, name := range []string{loop.BackendURing, loop.BackendEpoll, loop.BackendStd} {
		state := backendState{Name: name, Available: true}
		if err := loop.Available(name); err != nil {
			state.Available, state.Reason = false, err.Error()
		}
		states = append(states, state)
	}
	return states
}

// formatVersions are the newest on-disk versions this binary reads and
// writes: an operator compares them before moving a data directory between
// machines or downgrading.
type formatVersions struct {
	DataDir int `json:"data_dir"`
	Segment int `json:"segment"`
	Frame   int `json:"frame"`
	Body    int `json:"body"`
}

func newVersionCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version and the on-disk formats this binary understands",
		Long: `Print the ironbus version, the Go toolchain and platform it was built for,
the newest on-disk format versions it understands (the data directory
layout, segment files, frames, record bodies), and which network backends
run on this system: serve --loop auto takes the first available one.

A binary refuses data written in a newer format than it knows (exit code 4),
so compare these numbers before moving a data directory to another machine
or downgrading.`,
		Example: `  ironbus version
  ironbus version --json | jq .formats`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema "+versionSchema+")")
	cmd.RunE = classified(func() error {
		info := currentVersion()
		if opts.json {
			return writeJSON(opts.stdout, info)
		}
		fmt.Fprintf(opts.stdout, "ironbus %s\ngo: %s %s/%s\nformats: data dir %d, segment %d, frame %d, body %d\nnetwork backends (serve --loop):\n",
			info.Version, info.GoVersion, info.OS, info.Arch,
			info.Formats.DataDir, info.Formats.Segment, info.Formats.Frame, info.Formats.Body)
		for _, backend := range info.Backends {
			status := "available"
			if !backend.Available {
				status = "unavailable: " + backend.Reason
			}
			fmt.Fprintf(opts.stdout, "  %-6s %s\n", backend.Name, status)
		}
		return nil
	})
	return cmd
}

func currentVersion() versionOutput {
	return versionOutput{
		Schema:    versionSchema,
		Version:   mainModuleVersion(),
		GoVersion: runtime.Version(),
		OS:        runtime.GOOS,
		Arch:      runtime.GOARCH,
		Formats: formatVersions{
			DataDir: segment.EncryptedDataFormatVersion, // the newest it reads
			Segment: format.SegmentFormatVersion,
			Frame:   format.FrameVersion,
			Body:    record.BodyVersion,
		},
		Backends: probeBackends(),
	}
}

// stampedVersion is set at link time by `make dist` (-ldflags "-X
// main.stampedVersion=v1.2.3"): release binaries are built with -trimpath
// from a worktree the go command may not stamp, so the release name is
// written in explicitly. It is the one package-level variable here because
// the linker can only set those; nothing assigns it at run time.
var stampedVersion string

// mainModuleVersion is the version make dist stamped, else the module
// version the go command recorded (a tag, or a pseudo-version from VCS); a
// plain source build has neither, so it reads "devel".
func mainModuleVersion() string {
	if stampedVersion != "" {
		return stampedVersion
	}
	info, ok := debug.ReadBuildInfo()
	if !ok || info.Main.Version == "" || info.Main.Version == "(devel)" {
		return "devel"
	}
	return info.Main.Version
}
