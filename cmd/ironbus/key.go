package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/keyring"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

type keyOutput struct {
	Schema string   `json:"schema"`
	File   string   `json:"file"`
	Active uint32   `json:"active"`
	Keys   []uint32 `json:"keys"`
}

func newKeyCmd(opts *globalOptions) *cobra.Command {
	key := &cobra.Command{
		Use:   "key",
		Short: "Make and rotate the key ring of encryption at rest",
		Long: `A key ring holds the AES-256 keys a broker run with --encryption-key-file
seals record bodies with (AES-256-GCM): the newest key is active, older ones stay
for reading the records written under them. The file is mode 0600 and every
command refuses it otherwise. Keep a copy somewhere safe: without it the data is
unreadable. See docs/SECURITY.md, "Encryption at rest".`,
		Example: `  ironbus key create --out /etc/ironbus/data.keys
  ironbus serve --data-dir /data --encryption-key-file /etc/ironbus/data.keys
  ironbus key rotate /etc/ironbus/data.keys`,
		Args: cobra.NoArgs,
	}
	var out string
	create := &cobra.Command{
		Use:   "create --out FILE",
		Short: "Write a new key ring of one key to a new 0600 file",
		Long: `Write a new key ring holding one random 256-bit key (id 1, active) to FILE,
mode 0600. FILE must not exist: overwriting a ring would lose the key of the data
written under it.`,
		Example: `  ironbus key create --out data.keys`,
		Args:    cobra.NoArgs,
	}
	create.Flags().StringVar(&out, "out", "", "the key ring file to create (mode 0600; must not exist)")
	_ = create.MarkFlagRequired("out")
	create.Flags().BoolVar(&opts.json, "json", false, "print JSON (schema ironbus.cli.key.v1)")
	create.RunE = classified(func() error {
		ring, err := keyring.Create(out, time.Now())
		return printKeyRing(opts, out, ring, err, "created")
	})
	rotate := &cobra.Command{
		Use:   "rotate FILE",
		Short: "Add a new active key to a key ring",
		Long: `Add a new random key to the ring in FILE and make it active; the file is
rewritten crash-safely. A broker seals records with the active key from its next
start (restart it, or it keeps sealing under the key it started with); older keys
stay in the ring for reading records written under them. 'ironbus verify --json
--encryption-key-file FILE' lists the key ids the data still uses.`,
		Example: `  ironbus key rotate data.keys`,
		Args:    cobra.ExactArgs(1),
	}
	rotate.Flags().BoolVar(&opts.json, "json", false, "print JSON (schema ironbus.cli.key.v1)")
	rotate.RunE = func(_ *cobra.Command, args []string) error {
		return classified(func() error {
			ring, err := keyring.Rotate(args[0], time.Now())
			return printKeyRing(opts, args[0], ring, err, "rotated")
		})(nil, nil)
	}
	key.AddCommand(create, rotate)
	return key
}

func printKeyRing(opts *globalOptions, file string, ring *keyring.Ring, err error, verb string) error {
	switch {
	case errors.Is(err, keyring.ErrExists), errors.Is(err, keyring.ErrMalformed), errors.Is(err, security.ErrSecretFileExposed):
		return exitErrorf(exitUsage, "%w", err)
	case err != nil:
		return exitErrorf(exitNotFound, "%w", err)
	}
	result := keyOutput{Schema: "ironbus.cli.key.v1", File: file, Active: ring.Active().ID, Keys: ring.KeyIDs()}
	if opts.json {
		return writeJSON(opts.stdout, result)
	}
	fmt.Fprintf(opts.stdout, "key ring %s %s: active key %d of %d (mode 0600; keep a copy: the data is unreadable without it)\n",
		file, verb, result.Active, len(result.Keys))
	return nil
}

// addKeyFileFlag adds --encryption-key-file to an offline command.
func addKeyFileFlag(cmd *cobra.Command, target *string) {
	cmd.Flags().StringVar(target, "encryption-key-file", "",
		"the key ring the data directory is encrypted with (mode 0600; see `ironbus key`): opens encrypted records, and is refused if it is not the directory's")
}

// loadKeyRing loads the ring an offline command was given; none for "".
func loadKeyRing(path string) (segment.Encryption, error) {
	if path == "" {
		return nil, nil
	}
	ring, err := keyring.Load(path)
	if err != nil {
		return nil, exitErrorf(exitUsage, "--encryption-key-file: %w", err)
	}
	return ring, nil
}

// keyRingError says what to do about a missing or wrong key ring; nil
// for any other error.
func keyRingError(dataDir string, err error) error {
	switch {
	case errors.Is(err, segment.ErrKeyRequired), errors.Is(err, record.ErrNoKey):
		return exitErrorf(exitUsage, "%s is encrypted: pass --encryption-key-file naming the key ring it was written with "+
			"(a command without that flag works on it through a running broker) (%w)", dataDir, err)
	case errors.Is(err, segment.ErrWrongKey), errors.Is(err, record.ErrDecrypt):
		return exitErrorf(exitUsage, "--encryption-key-file is not the key ring %s was written with (%w)", dataDir, err)
	}
	return nil
}

// checkKeyRingOf refuses, before a tool copies or checks bytes it does
// not decrypt (backup, restore, scrub), a key ring given for a directory
// written with another; no ring given checks nothing.
func checkKeyRingOf(dataDir, keyFile string) error {
	ring, err := loadKeyRing(keyFile)
	if err != nil || ring == nil {
		return err
	}
	if err := segment.CheckKeyRing(vfs.OS{}, dataDir, ring); err != nil {
		if refused := keyRingError(dataDir, err); refused != nil {
			return refused
		}
		return exitErrorf(exitUnreadable, "--encryption-key-file: checking it against %s: %w", dataDir, err)
	}
	return nil
}
