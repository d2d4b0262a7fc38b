package main

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/security"
)

type authOptions struct {
	configPath  string
	request     security.IdentityRequest
	oldSubjects []string
	bytesRate   int64
	replace     bool
	passwd      passwdOptions
}

func newAuthCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Edit the broker's auth config: identities and their scopes",
		Long: `Add, list and remove identities in the auth config a broker reads with
'serve --auth-config'. Every change rewrites the file atomically (temporary
file, fsync, rename, fsync of the directory) with mode 0600; a running broker
picks it up within seconds (or on SIGHUP). See docs/SECURITY.md.`,
		Example: `  ironbus auth add --auth-config auth.toml --name writer --token-file writer.token --scopes publish --streams 'orders.>'
  printf '%s\n' "$PW" | ironbus auth add --auth-config auth.toml --name ops --password-stdin --scopes admin,subscribe
  ironbus auth add --auth-config auth.toml --name device-1 --mtls-identity spiffe://edge/device-1 --scopes publish
  ironbus auth ls --auth-config auth.toml
  ironbus auth rm --auth-config auth.toml --name writer`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newAuthAddCmd(opts), newAuthListCmd(opts), newAuthRemoveCmd(opts), newAuthExportCmd(opts))
	return cmd
}

func addAuthConfigFlag(cmd *cobra.Command, target *string) {
	cmd.Flags().StringVar(target, "auth-config", "", "the auth config file (TOML, mode 0600)")
	_ = cmd.MarkFlagRequired("auth-config")
}

func newAuthAddCmd(opts *globalOptions) *cobra.Command {
	auth := &authOptions{passwd: passwdOptions{memory: int64(security.DefaultArgon2id.MemoryKiB) << 10,
		iterations: security.DefaultArgon2id.Iterations, parallelism: security.DefaultArgon2id.Parallelism}}
	cmd := &cobra.Command{
		Use:   "add --auth-config F --name N (--token-file F | --password-stdin | --mtls-identity ID) --scopes S[,S]",
		Short: "Add an identity (creates the file if needed)",
		Long: `Add an identity with one credential and its scopes.

Credentials: --token-file stores the SHA-256 digest of the token in that file
(make one with 'ironbus token create --out F'); --password-stdin reads a
password from stdin and stores its Argon2id hash, the identity's name being the
username; --mtls-identity names a client certificate by its first URI SAN, else
its first DNS SAN. --expires ends the credential at an instant (stored in UTC;
a duration counts from now): past it the identity is refused like a wrong
secret and its open connections are closed. --replace with a new credential
rotates it: a running broker closes the connections that proved the old one
within a second of loading the file.

Scopes are publish, subscribe and admin; none implies another. Each granted
scope covers the --streams patterns, which match stream names (default ">" =
every stream): tokens split on '.', "*" matches one token, ">" the rest.
--publish-subjects patterns match record subjects: with them, every record
the identity publishes must carry a matching subject, on top of the publish
scope on the stream it lands in. --subscribe-subjects patterns do the same
for consuming: a consumer must name a subject filter within them. The --deny-*
patterns win over every grant: --deny-publish, --deny-subscribe and
--deny-admin name streams, --deny-publish-subjects and
--deny-subscribe-subjects subjects. --max-connections, --max-streams,
--max-partitions and --max-stored-bytes are quotas (0 = none; streams and
bytes count what the identity created, preallocated segments included).
Consumer group rules and account quotas are edited by hand (docs/SECURITY.md).

--account puts the identity in an account: its stream names, bindings, groups
and dead-letter queues are the account's own, invisible to other accounts
(default: the default account). The account "operator" administers every
account, naming a tenant's stream ACCOUNT/STREAM (docs/SECURITY.md, "Accounts").`,
		Example: `  ironbus auth add --auth-config auth.toml --name writer --token-file writer.token --scopes publish --streams 'orders.>' --streams audit
  ironbus auth add --auth-config auth.toml --name device-1 --mtls-identity spiffe://edge/device-1 --scopes publish --streams telemetry --publish-subjects 'telemetry.device-1.>'
  printf '%s\n' "$PW" | ironbus auth add --auth-config auth.toml --name ops --password-stdin --scopes admin`,
		Args: cobra.NoArgs,
	}
	flags := cmd.Flags()
	addAuthConfigFlag(cmd, &auth.configPath)
	entry := &auth.request.Entry
	flags.StringVar(&entry.Name, "name", "", "identity name (the username for --password-stdin)")
	flags.StringVar(&entry.Account, "account", "", "the identity's account (default: the default account; \"operator\" administers all)")
	flags.StringVar(&auth.request.TokenFile, "token-file", "", "file holding the identity's bearer token (its digest is stored)")
	flags.BoolVar(&auth.request.Password, "password-stdin", false, "read the identity's password from stdin (its Argon2id hash is stored)")
	flags.StringVar(&entry.MTLSIdentity, "mtls-identity", "", "client certificate identity (first URI SAN, else first DNS SAN)")
	flags.StringSliceVar(&auth.request.Scopes, "scopes", nil, "scopes to grant: publish, subscribe, admin (comma-separated)")
	flags.StringArrayVar(&auth.request.Streams, "streams", nil, "stream pattern the scopes cover (repeatable; default \">\")")
	flags.StringArrayVar(&entry.PublishSubjects, "publish-subjects", nil, "subject pattern the identity's records must match (repeatable; default: any)")
	// --subjects once took stream patterns under a subject's name; a script
	// that still passes it is told which of the two it meant, never given
	// either silently.
	flags.StringArrayVar(&auth.oldSubjects, "subjects", nil, "")
	_ = flags.MarkHidden("subjects")
	flags.Float64Var(&entry.PublishMessagesPerSecond, "publish-messages-per-second", 0, "publish quota in records per second (0 = none)")
	flags.Var(sizeValue{&auth.bytesRate}, "publish-bytes-per-second", "publish quota in bytes per second, with a unit (0 = none)")
	for _, rule := range []struct {
		name   string
		target *[]string
		help   string
	}{
		{"deny-publish", &entry.DenyPublish, "stream pattern the identity may not publish to, whatever its scopes grant (repeatable)"},
		{"deny-subscribe", &entry.DenySubscribe, "stream pattern the identity may not consume from, whatever its scopes grant (repeatable)"},
		{"deny-admin", &entry.DenyAdmin, "stream pattern the identity may not administer, whatever its scopes grant (repeatable)"},
		{"subscribe-subjects", &entry.SubscribeSubjects, "subject pattern a consumer's subject filter must lie within (repeatable; default: any)"},
		{"deny-publish-subjects", &entry.DenyPublishSubjects, "subject pattern the identity's records may not carry (repeatable)"},
		{"deny-subscribe-subjects", &entry.DenySubscribeSubjects, "subject pattern a consumer's subject filter may not reach (repeatable)"},
	} {
		flags.StringArrayVar(rule.target, rule.name, nil, rule.help)
	}
	flags.Int64Var(&entry.MaxConnections, "max-connections", 0, "quota: open connections of the identity (0 = none)")
	flags.Int64Var(&entry.MaxStreams, "max-streams", 0, "quota: streams the identity creates (0 = none)")
	flags.Int64Var(&entry.MaxPartitions, "max-partitions", 0, "quota: partitions of the streams the identity creates (0 = none)")
	flags.Var(sizeValue{&entry.MaxStoredBytes}, "max-stored-bytes", "quota: bytes on disk of the streams the identity creates, with a unit (0 = none)")
	flags.BoolVar(&auth.replace, "replace", false, "replace an identity of the same name")
	flags.StringVar(&auth.request.Expires, "expires", "", "end the credential: a duration from now (720h, 30d) or an RFC 3339 time (default: never)")
	flags.Var(sizeValue{&auth.passwd.memory}, "argon2-memory", "Argon2id memory per login for --password-stdin (64MiB)")
	flags.BoolVar(&opts.json, "json", false, "print the change as JSON (schema ironbus.cli.auth-change.v1)")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("scopes")
	cmd.RunE = classified(func() error { return runAuthAdd(opts, auth) })
	return cmd
}

func runAuthAdd(opts *globalOptions, auth *authOptions) error {
	if len(auth.oldSubjects) > 0 {
		return exitErrorf(exitUsage, "--subjects took stream patterns and is split in two: --streams %s for the streams the scopes cover, "+
			"or --publish-subjects %s for the subjects the identity's records must carry", auth.oldSubjects[0], auth.oldSubjects[0])
	}
	entry, err := auth.entry(opts)
	if err != nil {
		return err
	}
	file, err := security.ReadAuthFileOrEmpty(auth.configPath)
	if err != nil {
		return exitErrorf(exitUnreadable, "%w", err)
	}
	if err := file.Put(entry, auth.replace); err != nil {
		return exitErrorf(exitUsage, "identity %q already exists in %s; pass --replace to overwrite it, or `ironbus auth rm` it first", entry.Name, auth.configPath)
	}
	if err := security.SaveAuthFile(auth.configPath, file); err != nil {
		return exitErrorf(exitUsage, "%w", err)
	}
	return printAuthChange(opts, authChange{Schema: authChangeSchema, Action: "added", Name: entry.Name, Mechanism: entry.Mechanism(), File: auth.configPath})
}

// entry builds the identity from the flags, asking for a password only
// once the rest is known to be good.
func (auth *authOptions) entry(opts *globalOptions) (security.IdentityEntry, error) {
	auth.request.Entry.PublishBytesPerSecond = float64(auth.bytesRate)
	entry, err := auth.request.Build(time.Now())
	var field *security.FieldError
	switch {
	case errors.Is(err, security.ErrOneCredential):
		return entry, exitErrorf(exitUsage, "give exactly one of --token-file, --password-stdin, --mtls-identity")
	case errors.As(err, &field):
		return entry, exitErrorf(exitUsage, "--%s: %w", strings.ReplaceAll(field.Key, "_", "-"), field.Err)
	case err != nil:
		return entry, exitErrorf(exitUsage, "%w", err)
	}
	if auth.request.Password {
		password, err := readPasswordLine(opts)
		if err != nil {
			return entry, err
		}
		if entry.PasswordHash, err = auth.passwd.hash(password); err != nil {
			return entry, err
		}
	}
	return entry, nil
}

type authListOutput struct {
	Schema     string                     `json:"schema"`
	Identities []security.IdentitySummary `json:"identities"`
	Exports    []security.ExportRule      `json:"exports,omitempty"`
}

func newAuthListCmd(opts *globalOptions) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "ls --auth-config F",
		Short: "List identities, their mechanisms and scopes (never secrets)",
		Long: `List every identity of the auth config: name, mechanism, the patterns each
scope covers, the quotas and when the credential expires (UTC; "never", and
"(expired)" once past). Digests and hashes are not printed.`,
		Example: `  ironbus auth ls --auth-config auth.toml
  ironbus auth ls --auth-config auth.toml --json | jq '.identities[].name'`,
		Args: cobra.NoArgs,
	}
	addAuthConfigFlag(cmd, &path)
	cmd.Flags().BoolVar(&opts.json, "json", false, "print JSON (schema ironbus.cli.auth.v1)")
	cmd.RunE = classified(func() error {
		file, err := security.LoadAuthFile(path)
		if err != nil {
			return exitErrorf(exitUnreadable, "%w", err)
		}
		out := authListOutput{Schema: "ironbus.cli.auth.v1", Identities: []security.IdentitySummary{}, Exports: file.Exports}
		now := time.Now()
		for _, e := range file.Identities {
			out.Identities = append(out.Identities, e.Summary(now))
		}
		if opts.json {
			return writeJSON(opts.stdout, out)
		}
		if err := printIdentities(opts, out.Identities); err != nil {
			return err
		}
		for _, export := range file.Exports {
			fmt.Fprintf(opts.stdout, "export %s/%s to %s\n", cmp.Or(export.Account, security.DefaultAccount), export.Stream, strings.Join(export.To, ","))
		}
		return nil
	})
	return cmd
}

func printIdentities(opts *globalOptions, identities []security.IdentitySummary) error {
	table := tabwriter.NewWriter(opts.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(table, "NAME\tACCOUNT\tMECHANISM\tPUBLISH\tSUBSCRIBE\tADMIN\tQUOTA\tEXPIRES")
	show := func(patterns []string) string {
		if patterns == nil {
			return "-"
		}
		return strings.Join(patterns, ",")
	}
	for _, id := range identities {
		var quotas []string
		if id.PublishMessagesPerSecond > 0 || id.PublishBytesPerSecond > 0 {
			quotas = append(quotas, fmt.Sprintf("%g msg/s, %g B/s", id.PublishMessagesPerSecond, id.PublishBytesPerSecond))
		}
		for _, limit := range []struct {
			value int64
			unit  string
		}{{id.MaxConnections, "conns"}, {id.MaxStreams, "streams"}, {id.MaxPartitions, "partitions"}, {id.MaxStoredBytes, "B stored"}} {
			if limit.value > 0 {
				quotas = append(quotas, fmt.Sprintf("%d %s", limit.value, limit.unit))
			}
		}
		quota := "-"
		if len(quotas) > 0 {
			quota = strings.Join(quotas, ", ")
		}
		expires := "never"
		if id.Expires != "" {
			expires = id.Expires
		}
		if id.Expired {
			expires += " (expired)"
		}
		fmt.Fprintf(table, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id.Name, id.Account, id.Mechanism, show(id.Publish), show(id.Subscribe), show(id.Admin), quota, expires)
	}
	return table.Flush()
}

func newAuthRemoveCmd(opts *globalOptions) *cobra.Command {
	var path, name string
	cmd := &cobra.Command{
		Use:   "rm --auth-config F --name N",
		Short: "Remove an identity",
		Long: `Remove an identity from the auth config. A running broker reloads the file
(within its security reload interval, or on SIGHUP) and closes the identity's
open connections within a second of loading it (docs/SECURITY.md).
Exit code 2 when there is no such identity.`,
		Example: `  ironbus auth rm --auth-config auth.toml --name writer`,
		Args:    cobra.NoArgs,
	}
	addAuthConfigFlag(cmd, &path)
	cmd.Flags().StringVar(&name, "name", "", "identity to remove")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the change as JSON (schema ironbus.cli.auth-change.v1)")
	_ = cmd.MarkFlagRequired("name")
	cmd.RunE = classified(func() error {
		file, err := security.LoadAuthFile(path)
		if err != nil {
			return exitErrorf(exitUnreadable, "%w", err)
		}
		removed, err := file.Remove(name)
		if err != nil {
			return exitErrorf(exitNotFound, "no identity %q in %s (see `ironbus auth ls`)", name, path)
		}
		if err := security.SaveAuthFile(path, file); err != nil {
			return exitErrorf(exitUsage, "%w", err)
		}
		return printAuthChange(opts, authChange{Schema: authChangeSchema, Action: "removed", Name: name, Mechanism: removed.Mechanism(), File: path})
	})
	return cmd
}

func newAuthExportCmd(opts *globalOptions) *cobra.Command {
	var path, account, stream, to string
	var revoke bool
	cmd := &cobra.Command{
		Use:   "export --auth-config F --account OWNER --stream S --to ACCOUNT [--revoke]",
		Short: "Let another account consume one of an account's streams",
		Long: `Export a stream of account OWNER to account ACCOUNT, or --revoke that. The
importing account names the stream OWNER/S and may only consume from it (its
subscribe scope must cover OWNER/S); its groups on it are its own. A running
broker applies the change on reload; each connection's first read of an
import is audited (docs/SECURITY.md, "Accounts").`,
		Example: `  ironbus auth export --auth-config auth.toml --account acme --stream orders --to beta`,
		Args:    cobra.NoArgs,
	}
	addAuthConfigFlag(cmd, &path)
	cmd.Flags().StringVar(&account, "account", security.DefaultAccount, "the account owning the stream")
	cmd.Flags().StringVar(&stream, "stream", "", "the stream exported")
	cmd.Flags().StringVar(&to, "to", "", "the account that may consume it")
	cmd.Flags().BoolVar(&revoke, "revoke", false, "take the export back")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the change as JSON (schema ironbus.cli.auth-change.v1)")
	_ = cmd.MarkFlagRequired("stream")
	_ = cmd.MarkFlagRequired("to")
	cmd.RunE = classified(func() error {
		file, err := security.LoadAuthFile(path)
		if err != nil {
			return exitErrorf(exitUnreadable, "%w", err)
		}
		if err := file.Export(account, stream, to, revoke); err != nil {
			return exitErrorf(exitNotFound, "%w", err)
		}
		if err := security.SaveAuthFile(path, file); err != nil {
			return exitErrorf(exitUsage, "%w", err)
		}
		action := map[bool]string{false: "exported", true: "revoked"}[revoke]
		return printAuthChange(opts, authChange{Schema: authChangeSchema, Action: action, Name: account + "/" + stream + " to " + to, Mechanism: "export", File: path})
	})
	return cmd
}

const authChangeSchema = "ironbus.cli.auth-change.v1"

// authChange reports what auth add or rm did.
type authChange struct {
	Schema    string `json:"schema"`
	Action    string `json:"action"` // added or removed
	Name      string `json:"name"`
	Mechanism string `json:"mechanism"`
	File      string `json:"file"`
}

func printAuthChange(opts *globalOptions, change authChange) error {
	if opts.json {
		return writeJSON(opts.stdout, change)
	}
	fmt.Fprintf(opts.stdout, "identity %q (%s) %s: %s\n", change.Name, change.Mechanism, change.Action, change.File)
	return nil
}
