package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

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
and the newest on-disk format versions it understands: the data directory
layout, segment files, frames (record, commit, footer) and record bodies.

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
		_, err := fmt.Fprintf(opts.stdout, "ironbus %s\ngo: %s %s/%s\nformats: data dir %d, segment %d, frame %d, body %d\n",
			info.Version, info.GoVersion, info.OS, info.Arch,
			info.Formats.DataDir, info.Formats.Segment, info.Formats.Frame, info.Formats.Body)
		return err
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
			DataDir: segment.DataFormatVersion,
			Segment: format.SegmentFormatVersion,
			Frame:   format.FrameVersion,
			Body:    format.BodyVersion,
		},
	}
}

// mainModuleVersion is the module version the go command stamped into the
// binary (a tag, or a pseudo-version from VCS); a plain source build has
// none, so it reads "devel".
func mainModuleVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok || info.Main.Version == "" || info.Main.Version == "(devel)" {
		return "devel"
	}
	return info.Main.Version
}
