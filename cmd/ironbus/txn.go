package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
	"github.com/ironbus/ironbus/txn"
)

// txnSchema names the JSON object txn list and txn show print.
const txnSchema = "ironbus.txn.v1"

type txnOutput struct {
	Schema       string     `json:"schema"`
	Transactions []txnEntry `json:"transactions"`
}

type txnEntry struct {
	ID         uint64 `json:"id"`
	Identity   string `json:"identity"`
	Records    uint32 `json:"records"`
	Bytes      int64  `json:"bytes"`
	Committing bool   `json:"committing"`
}

func newTxnCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "Inspect the transactions a data directory leaves open, read-only",
		Long: `Read the transaction log of a stopped broker's data directory (<data-dir>/txn)
and list the transactions it leaves open. The next start ends all of them: a
transaction whose commit intent is written ("committing") is rolled forward
into its partitions, every other one is aborted. Nothing is changed; a
directory a broker is serving is refused (exit 5). See docs/PRODUCERS.md,
"Transactions".`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newTxnListCmd(opts), newTxnShowCmd(opts))
	return cmd
}

func newTxnListCmd(opts *globalOptions) *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:     "list --data-dir DIR",
		Aliases: []string{"ls"},
		Short:   "List the open transactions of a stopped broker's data directory",
		Example: `  ironbus txn list --data-dir /var/lib/ironbus`,
		Args:    cobra.NoArgs,
	}
	addDataDirFlag(cmd, &dataDir)
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one "+txnSchema+" JSON object")
	cmd.RunE = classified(func() error {
		entries, err := openTransactions(dataDir)
		if err != nil {
			return err
		}
		return printTransactions(opts, entries)
	})
	return cmd
}

func newTxnShowCmd(opts *globalOptions) *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:     "show ID --data-dir DIR",
		Short:   "Show one open transaction of a stopped broker's data directory",
		Example: `  ironbus txn show 4711 --data-dir /var/lib/ironbus`,
		Args:    cobra.ExactArgs(1),
	}
	addDataDirFlag(cmd, &dataDir)
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one "+txnSchema+" JSON object")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return classify(func() error {
			id, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil {
				return exitErrorf(exitUsage, "transaction id %q: want an unsigned integer", args[0])
			}
			entries, err := openTransactions(dataDir)
			if err != nil {
				return err
			}
			for _, entry := range entries {
				if entry.ID == id {
					return printTransactions(opts, []txnEntry{entry})
				}
			}
			return exitErrorf(exitNotFound, "transaction %d is not open in %s (ended, or never begun)", id, dataDir)
		}())
	}
	return cmd
}

// openTransactions reads the open transactions of dataDir's transaction
// log (none when it has none).
func openTransactions(dataDir string) ([]txnEntry, error) {
	if err := requireDataDir(dataDir); err != nil {
		return nil, err
	}
	infos, err := txn.Inspect(vfs.OS{}, filepath.Join(dataDir, "txn"), segment.Options{})
	if err != nil {
		return nil, openDirError(dataDir, err)
	}
	entries := make([]txnEntry, 0, len(infos))
	for _, info := range infos {
		entries = append(entries, txnEntry{ID: info.ID, Identity: info.Identity, Records: info.Records, Bytes: info.Bytes, Committing: info.Committing})
	}
	return entries, nil
}

func printTransactions(opts *globalOptions, entries []txnEntry) error {
	if opts.json {
		return writeJSON(opts.stdout, txnOutput{Schema: txnSchema, Transactions: entries})
	}
	if len(entries) == 0 {
		_, err := fmt.Fprintln(opts.stdout, "no open transactions")
		return err
	}
	w := tabwriter.NewWriter(opts.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSTATE\tRECORDS\tBYTES\tIDENTITY")
	for _, e := range entries {
		state := "open (aborted at the next start)"
		if e.Committing {
			state = "committing (rolled forward at the next start)"
		}
		fmt.Fprintf(w, "%d\t%s\t%d\t%d\t%s\n", e.ID, state, e.Records, e.Bytes, e.Identity)
	}
	return w.Flush()
}
