package main

import (
	"context"
	"errors"
	"strings"

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

// notAuthorizedHint is the fix for a broker that refused the credentials.
const notAuthorizedHint = "check --token-file, or --user and --password-file, or the client certificate; " +
	"repeated failures lock this address out for a while"

// connectRefusal explains a broker that refused the credentials.
func connectRefusal(addr string, err error) error {
	if code, ok := wireCode(err); ok && code == wire.CodeNotAuthorized {
		return exitErrorf(exitNotAuthorized, "the broker at %s refused the credentials (not authorized): %s", addr, notAuthorizedHint)
	}
	return nil
}

// wireCode is the code of the broker's error inside err, if there is one.
func wireCode(err error) (wire.Code, bool) {
	var refused *wire.Error
	if errors.As(err, &refused) {
		return refused.Code, true
	}
	return 0, false
}

// brokerError classifies what a client call returned, the same way for
// every client command: a missing stream or group exits 2 with the verbs
// that list and create streams, refused credentials or scope 6, a broken
// connection 5, a record over the broker's limit 3 with the setting that
// raises it, and any other refusal by the broker 3. stream is the stream
// the call named ("" when none), for the message.
func brokerError(err error, stream string) error {
	var exit *exitError
	if errors.As(err, &exit) {
		return err
	}
	err = readableBrokerError(err)
	code, fromBroker := wireCode(err)
	switch {
	case fromBroker && code == wire.CodeNotAuthorized:
		return exitErrorf(exitNotAuthorized, "the broker refused the credentials (not authorized): %s (%w)", notAuthorizedHint, err)
	case fromBroker && code == wire.CodePermissionDenied:
		return exitErrorf(exitNotAuthorized, "not authorized: %w; the identity needs the scope for this request (ironbus auth ls shows scopes)", err)
	case fromBroker && code == wire.CodeNotFound:
		return notFoundError(err, stream)
	case fromBroker && code == wire.CodeQuotaExceeded:
		return exitErrorf(exitRefused, "%w; ironbus auth ls shows the identity's quotas", err)
	case fromBroker && code == wire.CodeInvalidName:
		return exitErrorf(exitUsage, "%w", err) // a stream or group name the user typed
	case fromBroker && code == wire.CodeRecordTooLarge, errors.Is(err, client.ErrRecordTooLarge):
		return exitErrorf(exitRefused, "%w; %s", err, recordLimitHint)
	case errors.Is(err, client.ErrConnectionLost), errors.Is(err, client.ErrClosed):
		return exitErrorf(exitUnreachable, "the connection to the broker broke: %w", err)
	case errors.Is(err, client.ErrInvalidArgument), errors.Is(err, client.ErrInvalidSubject):
		return exitErrorf(exitUsage, "%w", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return exitErrorf(exitUnreachable, "the request to the broker did not complete: %w", err)
	}
	return exitErrorf(exitRefused, "%w", err)
}

// brokerText is an error whose text shows the broker's error by its
// message and code name (not_found, no_route) rather than "ironbus: …
// (code 12)", which would repeat the prefix the command line adds.
type brokerText struct {
	err  error
	text string
}

func (e *brokerText) Error() string { return e.text }

func (e *brokerText) Unwrap() error { return e.err }

// readableBrokerError rewrites the broker's part of err's text, keeping
// err as the cause for errors.Is and errors.As.
func readableBrokerError(err error) error {
	var refused *wire.Error
	if !errors.As(err, &refused) {
		return err
	}
	said := refused.Message + " (" + refused.Code.String()
	if refused.Retryable {
		said += ", retryable"
		if refused.RetryAfter > 0 {
			said += " after " + refused.RetryAfter.String()
		}
	}
	said += ")"
	return &brokerText{err: err, text: strings.Replace(err.Error(), refused.Error(), said, 1)}
}

// recordLimitHint names the setting behind the largest record.
const recordLimitHint = "the broker's max_frame setting (serve --max-frame) bounds a record, " +
	"which is at most 16 MiB whatever it is set to; split the payload or raise max_frame"

// notFoundError explains a stream, partition or group the broker does not
// have. Consume and admin verbs never create a stream, so the hint says
// how to see and make one.
func notFoundError(err error, stream string) error {
	if stream == "" {
		return exitErrorf(exitNotFound, "%w; `ironbus stream ls` lists the streams and `ironbus group ls` the groups", err)
	}
	return exitErrorf(exitNotFound, "%w; stream %q: `ironbus stream ls` lists the streams, `ironbus stream create %s` creates it, "+
		"and `ironbus group ls --stream %s` lists its groups", err, stream, stream, stream)
}
