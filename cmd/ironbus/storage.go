package main

import (
	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/segment/vfs"
)

// memoryDataDir is the data directory inside the in-memory file system:
// any name works, this one reads well in logs.
const memoryDataDir = "/memory"

// storageOptions choose where logs live: files on disk, or RAM that no
// restart survives.
type storageOptions struct {
	kind       string
	acceptLoss bool
	capacity   int64
}

func addStorageFlags(cmd *cobra.Command, storage *storageOptions) {
	flags := cmd.Flags()
	storage.kind = "disk"
	flags.Var(choiceValue{&storage.kind, []string{"disk", "memory"}}, "storage",
		"where logs live: disk (the data directory) or memory (RAM only: nothing survives a restart; needs --accept-memory-storage-loss and --memory-storage-cap)")
	flags.BoolVar(&storage.acceptLoss, "accept-memory-storage-loss", false,
		"consent to --storage memory: every record is lost when the process stops, crashes or loses power")
	flags.Var(sizeValue{&storage.capacity}, "memory-storage-cap", "bytes of records --storage memory may hold (32MiB); producers then get the storage-full error")
}

func (storage storageOptions) inMemory() bool { return storage.kind == "memory" }

// check refuses memory storage without consent or a cap, a data directory
// it would ignore, and a cap that cannot hold two segments (the active
// one is preallocated whole, and a stream's dead-letter queue has its own).
func (storage storageOptions) check(serve *serveOptions) error {
	if !storage.inMemory() {
		if storage.acceptLoss || storage.capacity != 0 {
			return exitErrorf(exitUsage, "--accept-memory-storage-loss and --memory-storage-cap apply only to --storage memory")
		}
		return nil
	}
	switch {
	case !storage.acceptLoss:
		return exitErrorf(exitUsage, "--storage memory keeps records only in RAM: a stop, crash or power cut loses every one, acknowledged or not; "+
			"add --accept-memory-storage-loss to accept that")
	case storage.capacity <= 0:
		return exitErrorf(exitUsage, "--storage memory needs --memory-storage-cap (for example 32MiB): RAM is bounded, and producers get the storage-full error at the cap")
	case serve.dataDir != "":
		return exitErrorf(exitUsage, "--data-dir %s: --storage memory writes no files; drop one of them", serve.dataDir)
	case storage.capacity < 2*serve.segmentBytes:
		return exitErrorf(exitUsage, "--memory-storage-cap %s cannot hold two segments of --segment-bytes %s; lower --segment-bytes or raise the cap",
			formatSize(storage.capacity), formatSize(serve.segmentBytes))
	}
	return nil
}

// apply points the broker at a volatile in-memory file system capped at
// the storage cap; a write past it fails as a full disk does.
func (storage storageOptions) apply(cfg *broker.Config) {
	if storage.inMemory() {
		cfg.FS, cfg.DataDir = vfs.NewVolatileFS(storage.capacity), memoryDataDir
	}
}

// registerMemory counts the stored bytes in the RAM budget: the volatile
// file system holds each once, mappings included.
func (storage storageOptions) registerMemory(budget *arena.Budget) {
	if storage.inMemory() {
		budget.Register("in-memory storage", "--memory-storage-cap", storage.capacity)
	}
}
