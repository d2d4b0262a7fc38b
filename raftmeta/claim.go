package raftmeta

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ironbus/ironbus/segment/vfs"
)

// identityFileName names the file in the meta directory that says which
// node and incarnation its store belongs to.
const identityFileName = "IDENTITY"

type storeIdentity struct {
	Node        uint32 `json:"node"`
	Incarnation uint32 `json:"incarnation"`
}

// claimDir makes dir this identity's: the identity file is written
// before the store exists, so a store without one, or with another's,
// belongs to someone else (a copied or restored directory, another node
// id). Such a store is moved aside, never reused: its vote and log are
// that identity's, and a vote cast twice in one term is how two leaders
// arise.
func claimDir(dir string, node, incarnation uint32, logger *slog.Logger) error {
	want := storeIdentity{Node: node, Incarnation: incarnation}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := mkdirDurable(dir); err != nil {
			return err
		}
		return writeIdentity(dir, want)
	case err != nil:
		return fmt.Errorf("raftmeta: reading %s: %w", dir, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, identityFileName))
	var found storeIdentity
	if err == nil && json.Unmarshal(data, &found) == nil && found == want {
		return nil
	}
	if len(entries) == 0 || (len(entries) == 1 && entries[0].Name() == identityFileName+".tmp") {
		return writeIdentity(dir, want)
	}
	aside := dir + ".foreign-" + hex8(found.Incarnation)
	for n := 1; ; n++ {
		if _, err := os.Stat(aside); errors.Is(err, fs.ErrNotExist) {
			break
		}
		aside = dir + ".foreign-" + hex8(found.Incarnation) + "-" + strconv.Itoa(n)
	}
	logger.Warn("the metadata store belongs to another node or incarnation; moved aside, starting empty",
		"store_node", found.Node, "store_incarnation", hex8(found.Incarnation), "incarnation", hex8(incarnation), "aside", aside)
	if err := os.Rename(dir, aside); err != nil {
		return fmt.Errorf("raftmeta: moving %s aside: %w", dir, err)
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := mkdirDurable(dir); err != nil {
		return err
	}
	return writeIdentity(dir, want)
}

func mkdirDurable(dir string) error {
	if err := vfs.MkdirAllDurable(vfs.OS{}, dir); err != nil {
		return fmt.Errorf("raftmeta: creating %s: %w", dir, err)
	}
	return nil
}

// writeIdentity replaces the identity file crash-safely (write a
// temporary file, sync it, rename it, sync the directory).
func writeIdentity(dir string, id storeIdentity) error {
	data, _ := json.Marshal(id)
	name := filepath.Join(dir, identityFileName)
	if err := vfs.WriteFileAtomic(vfs.OS{}, name, append(data, '\n')); err != nil {
		return fmt.Errorf("raftmeta: writing %s: %w", name, err)
	}
	return nil
}

func syncDir(dir string) error {
	if err := (vfs.OS{}).SyncDir(dir); err != nil {
		return fmt.Errorf("raftmeta: syncing %s: %w", dir, err)
	}
	return nil
}

// hex8 formats an incarnation as its 8 hex digits.
func hex8(v uint32) string { return fmt.Sprintf("%08x", v) }
