package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/wire"
)

// connectOptions are how a client verb reaches a secured broker: TLS and
// credentials. One set of flags, registered on every verb that dials.
type connectOptions struct {
	tls          security.ClientTLSOptions
	tokenFile    string
	user         string
	passwordFile string
}

// clientVerbAnnotation marks a command that dials a broker.
const clientVerbAnnotation = "ironbus.client-verb"

// markClientVerb marks cmd as dialing a broker: addConnectFlags gives it
// the shared TLS and credential flags.
func markClientVerb(cmd *cobra.Command) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[clientVerbAnnotation] = "true"
}

// addConnectFlags registers the connection flags on every marked command
// under root. They all bind the same options: one command runs per
// process.
func addConnectFlags(root *cobra.Command, options *connectOptions) {
	for _, cmd := range root.Commands() {
		addConnectFlags(cmd, options)
	}
	if root.Annotations[clientVerbAnnotation] != "true" {
		return
	}
	flags := root.Flags()
	flags.StringVar(&options.tls.CAFile, "tls-ca", "", "speak TLS 1.3 and verify the broker against this CA certificate file (PEM)")
	flags.StringVar(&options.tls.CertFile, "tls-cert", "", "client certificate (PEM) for a broker that requires mTLS; with --tls-key")
	flags.StringVar(&options.tls.KeyFile, "tls-key", "", "private key of --tls-cert (must be mode 0600)")
	flags.StringVar(&options.tls.ServerName, "tls-server-name", "", "name to expect in the broker's certificate (default: the host of --addr)")
	flags.StringVar(&options.tokenFile, "token-file", "", "authenticate with the bearer token in this file (mode 0600; `ironbus token create`)")
	flags.StringVar(&options.user, "user", "", "authenticate as this user; the password comes from --password-file")
	flags.StringVar(&options.passwordFile, "password-file", "", "file holding --user's password on its first line (mode 0600)")
}

// apply turns the flags into client options.
func (o *connectOptions) apply(options *client.Options) error {
	if o.tls.Enabled() {
		config, err := security.ClientTLSConfig(o.tls)
		if err != nil {
			return exitErrorf(exitUsage, "%w", err)
		}
		options.TLS = config
	}
	switch {
	case o.tokenFile != "" && (o.user != "" || o.passwordFile != ""):
		return exitErrorf(exitUsage, "use --token-file or --user with --password-file, not both")
	case o.tokenFile != "":
		token, err := security.ReadSecretLine(o.tokenFile)
		if err != nil {
			return exitErrorf(exitUsage, "--token-file: %w", err)
		}
		options.Auth = client.TokenAuth(string(token))
	case (o.user == "") != (o.passwordFile == ""):
		return exitErrorf(exitUsage, "--user and --password-file go together")
	case o.user != "":
		password, err := security.ReadSecretLine(o.passwordFile)
		if err != nil {
			return exitErrorf(exitUsage, "--password-file: %w", err)
		}
		options.Auth = client.PasswordAuth(o.user, string(password))
	case o.tls.CertFile != "":
		options.Auth = client.MTLSAuth()
	}
	return nil
}

// connectRefusal explains a broker that refused the credentials.
func connectRefusal(addr string, err error) error {
	var refused *wire.Error
	if errors.As(err, &refused) && refused.Code == wire.CodeNotAuthorized {
		return exitErrorf(exitLocked, "the broker at %s refused the credentials (not authorized): check --token-file, or --user and --password-file, "+
			"or the client certificate; repeated failures lock this address out for a while", addr)
	}
	return nil
}
