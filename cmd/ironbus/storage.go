package main

import (
	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/server"
)

// addStorageFlags adds the choice of where logs live: files on disk, or
// RAM that no restart survives.
func addStorageFlags(cmd *cobra.Command, cfg *server.Config) {
	flags := cmd.Flags()
	flags.Var(choiceValue{&cfg.Storage, []string{server.StorageDisk, server.StorageMemory}}, "storage",
		"where logs live: disk (the data directory) or memory (RAM only: nothing survives a restart; needs --accept-memory-storage-loss and --memory-storage-cap)")
	flags.BoolVar(&cfg.AcceptMemoryStorageLoss, "accept-memory-storage-loss", false,
		"consent to --storage memory: every record is lost when the process stops, crashes or loses power")
	flags.Var(sizeValue{&cfg.MemoryStorageCap}, "memory-storage-cap", "bytes of records --storage memory may hold (32MiB); producers then get the storage-full error")
}
