package main

import (
	"github.com/spf13/cobra"
)

func newCompletionCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script",
		Long: `Print the completion script for a shell to standard output. Once loaded,
Tab completes commands, subcommands and flags.

  bash  needs the bash-completion package; load it for this shell with
        source <(ironbus completion bash), or for everyone by writing it to
        /etc/bash_completion.d/ironbus
  zsh   write it to a directory in $fpath as _ironbus (compinit must be on)
  fish  write it to ~/.config/fish/completions/ironbus.fish`,
		Example: `  source <(ironbus completion bash)
  ironbus completion bash | sudo tee /etc/bash_completion.d/ironbus > /dev/null
  ironbus completion zsh > "${fpath[1]}/_ironbus"
  ironbus completion fish > ~/.config/fish/completions/ironbus.fish`,
		ValidArgs:             []string{"bash", "zsh", "fish"},
		Args:                  cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		DisableFlagsInUseLine: true,
	}
	cmd.RunE = classified(func() error {
		root := cmd.Root()
		var err error
		switch cmd.Flags().Arg(0) {
		case "bash":
			err = root.GenBashCompletionV2(opts.stdout, true)
		case "zsh":
			err = root.GenZshCompletion(opts.stdout)
		case "fish":
			err = root.GenFishCompletion(opts.stdout, true)
		}
		if err != nil {
			return exitErrorf(exitInternal, "writing the completion script: %w", err)
		}
		return nil
	})
	return cmd
}
