package security

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Accounts. Every identity belongs to one account, and the stream names,
// subjects and binding patterns it uses live in that account's namespace.
// The engine knows nothing of accounts: a Namespace maps an account's
// names to the engine's (internal) names at the door and back, so two
// accounts can each own a stream "orders" and never see each other's.
//
//   - The default account's names are the engine's names unchanged, so a
//     data dir written before accounts existed keeps its layout. Names
//     and subjects whose first token begins with ReservedPrefix belong to
//     other accounts: the default account may not use them.
//   - A tenant account's stream "orders" is the engine's
//     "__acme.orders" (ReservedPrefix, the account, '.', the name); its
//     dead-letter queue ".dlq.orders" is ".dlq.__acme.orders"; its subject
//     "orders.eu" and binding pattern "orders.>" are "__acme.orders.eu" and
//     "__acme.orders.>".
//   - The operator account owns no names: it addresses the default
//     account's streams by their bare names and a tenant's as
//     "ACCOUNT/STREAM" ('/' is in no stream name). Its scopes match those
//     spellings.

// Account names.
const (
	// DefaultAccount holds every identity without an account, and every
	// client of a broker without auth.
	DefaultAccount = "default"
	// OperatorAccount administers every account.
	OperatorAccount = "operator"
	// ReservedPrefix begins the first token of every engine name of a
	// tenant account.
	ReservedPrefix = "__"
	// maxAccountName keeps an account's prefix short next to the 128-byte
	// stream name limit.
	maxAccountName = 32
	// accountSeparator joins account and stream in the operator's names.
	accountSeparator = '/'
	deadLetterPrefix = ".dlq."
)

// ErrForeignName reports a name outside the requester's account: one the
// default account may not use (its first token begins with
// ReservedPrefix), or an operator's "ACCOUNT/STREAM" that is not valid.
var ErrForeignName = errors.New("security: name outside the account")

// ValidateAccount checks an account name: 1 to 32 letters, digits, '-'
// or '_', not starting with ReservedPrefix.
func ValidateAccount(name string) error {
	if name == "" || len(name) > maxAccountName || strings.HasPrefix(name, ReservedPrefix) {
		return fmt.Errorf("%w: account %q: use 1 to %d letters, digits, '-' or '_', not starting with %q", ErrAuthConfig, name, maxAccountName, ReservedPrefix)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("%w: account %q has %q at byte %d: use letters, digits, '-' or '_'", ErrAuthConfig, name, c, i)
		}
	}
	return nil
}

// accountOf returns the account an entry's account field names.
func accountOf(field string) (string, error) {
	if field == "" {
		return DefaultAccount, nil
	}
	if err := ValidateAccount(field); err != nil {
		return "", err
	}
	return field, nil
}

// Namespace maps one account's names to the engine's and back. The zero
// value is the default account's.
type Namespace struct {
	account  string
	prefix   string // the engine's names of the account begin with it ("" for the default account)
	operator bool
}

// NamespaceOf returns the namespace of account (DefaultAccount for "").
func NamespaceOf(account string) Namespace {
	switch account {
	case "", DefaultAccount:
		return Namespace{}
	case OperatorAccount:
		return Namespace{account: OperatorAccount, operator: true}
	}
	return Namespace{account: account, prefix: ReservedPrefix + account + "."}
}

// Account names the namespace's account.
func (n Namespace) Account() string {
	if n.account == "" {
		return DefaultAccount
	}
	return n.account
}

// Operator reports whether the namespace is the operator account's.
func (n Namespace) Operator() bool { return n.operator }

// Plain reports whether names pass through unchanged (the default
// account's namespace).
func (n Namespace) Plain() bool { return n.prefix == "" && !n.operator }

// Reserved reports whether a name's first token begins with
// ReservedPrefix (after a dead-letter prefix).
func Reserved[Name string | []byte](name Name) bool {
	return hasPrefix(name, ReservedPrefix)
}

// hasPrefix is strings.HasPrefix for bytes too, without converting them.
func hasPrefix[Name string | []byte](name Name, prefix string) bool {
	if len(name) < len(prefix) {
		return false
	}
	for i := range len(prefix) {
		if name[i] != prefix[i] {
			return false
		}
	}
	return true
}

// AppendStream appends the engine's name of stream (which may be a
// dead-letter queue's ".dlq.NAME") to out. The default account's names
// come back as they are; an empty name stays empty (the engine's default
// or a broker-wide list).
func (n Namespace) AppendStream(out, stream []byte) ([]byte, error) {
	if len(stream) == 0 {
		return out, nil
	}
	body := stream
	if hasPrefix(stream, deadLetterPrefix) {
		body = stream[len(deadLetterPrefix):]
		out = append(out, deadLetterPrefix...)
	}
	if n.operator {
		if at := bytes.IndexByte(body, accountSeparator); at >= 0 {
			account := string(body[:at])
			if account == DefaultAccount {
				return n.plainStream(out, body[at+1:])
			}
			if ValidateAccount(account) != nil || account == OperatorAccount {
				return out, fmt.Errorf("%w: %q: the account before '/' is not a valid account name", ErrForeignName, body)
			}
			return NamespaceOf(account).plainStream(out, body[at+1:])
		}
	}
	return n.plainStream(out, body)
}

func (n Namespace) plainStream(out, body []byte) ([]byte, error) {
	if Reserved(body) {
		return out, fmt.Errorf("%w: %q: names beginning with %q are reserved for accounts", ErrForeignName, body, ReservedPrefix)
	}
	// "acme/orders" reads as another account's stream (an import,
	// consumed only); any other name with '/' is the engine's to refuse
	// as invalid.
	if at := bytes.IndexByte(body, accountSeparator); at >= 0 && ValidateAccount(string(body[:at])) == nil {
		return out, fmt.Errorf("%w: %q: no such stream in the account (a stream another account exports is only consumed from)", ErrForeignName, body)
	}
	return append(append(out, n.prefix...), body...), nil
}

// Stream is AppendStream for a string.
func (n Namespace) Stream(stream string) (string, error) {
	if n.Plain() {
		if Reserved(strings.TrimPrefix(stream, deadLetterPrefix)) {
			return "", fmt.Errorf("%w: %q: names beginning with %q are reserved for accounts", ErrForeignName, stream, ReservedPrefix)
		}
		return stream, nil
	}
	out, err := n.AppendStream(nil, []byte(stream))
	return string(out), err
}

// AppendSubject appends the engine's form of a subject or binding pattern
// to out: a tenant's carry its prefix; the default account's are
// unchanged, and may not begin with ReservedPrefix; the operator's are the
// default account's, or a tenant's written "ACCOUNT/PATTERN".
func (n Namespace) AppendSubject(out, subject []byte) ([]byte, error) {
	if n.operator {
		// "acme/orders.>" is acme's "orders.>".
		if at := bytes.IndexByte(subject, accountSeparator); at > 0 && bytes.IndexByte(subject[:at], '.') < 0 {
			account := string(subject[:at])
			if ValidateAccount(account) != nil || account == OperatorAccount {
				return out, fmt.Errorf("%w: %q: the account before '/' is not a valid account name", ErrForeignName, subject)
			}
			return NamespaceOf(account).AppendSubject(out, subject[at+1:])
		}
	}
	if Reserved(subject) && n.prefix == "" {
		return out, fmt.Errorf("%w: subject %q: subjects beginning with %q are reserved for accounts", ErrForeignName, subject, ReservedPrefix)
	}
	return append(append(out, n.prefix...), subject...), nil
}

// Subject is AppendSubject for a string.
func (n Namespace) Subject(subject string) (string, error) {
	if n.Plain() && !Reserved(subject) {
		return subject, nil
	}
	out, err := n.AppendSubject(nil, []byte(subject))
	return string(out), err
}

// External returns how the account names the engine's stream (or
// dead-letter queue) name, and false when the name is not the account's:
// the caller then shows nothing of it.
func (n Namespace) External(name string) (string, bool) {
	dead := ""
	if rest, ok := strings.CutPrefix(name, deadLetterPrefix); ok {
		dead, name = deadLetterPrefix, rest
	}
	switch {
	case n.operator:
		if account, rest, ok := cutAccount(name); ok {
			return dead + account + string(accountSeparator) + rest, true
		}
		return dead + name, true
	case n.prefix == "":
		return dead + name, !Reserved(name)
	}
	rest, ok := strings.CutPrefix(name, n.prefix)
	return dead + rest, ok
}

// ExternalPattern is External for a binding pattern or subject.
func (n Namespace) ExternalPattern(pattern string) (string, bool) {
	switch {
	case n.operator:
		if account, rest, ok := cutAccount(pattern); ok {
			return account + string(accountSeparator) + rest, true
		}
		return pattern, true
	case n.prefix == "":
		return pattern, !Reserved(pattern)
	}
	rest, ok := strings.CutPrefix(pattern, n.prefix)
	return rest, ok
}

// cutAccount splits an engine name "__acme.orders" into "acme" and
// "orders".
func cutAccount(name string) (account, rest string, ok bool) {
	body, ok := strings.CutPrefix(name, ReservedPrefix)
	if !ok {
		return "", "", false
	}
	account, rest, ok = strings.Cut(body, ".")
	return account, rest, ok && account != ""
}

// Hide rewrites a message about the engine's names into the account's
// names: a tenant's prefix is removed wherever it appears; for the
// operator, every tenant's "__acme." becomes "acme/". Messages are built
// from the requester's own names only, so nothing else needs hiding.
func (n Namespace) Hide(message string) string {
	switch {
	case n.operator:
		if !strings.Contains(message, ReservedPrefix) {
			return message
		}
		var out strings.Builder
		for {
			at := strings.Index(message, ReservedPrefix)
			if at < 0 {
				break
			}
			out.WriteString(message[:at])
			account, _, ok := cutAccount(message[at:])
			if !ok {
				out.WriteString(ReservedPrefix)
				message = message[at+len(ReservedPrefix):]
				continue
			}
			out.WriteString(account)
			out.WriteByte(accountSeparator)
			message = message[at+len(ReservedPrefix)+len(account)+1:]
		}
		out.WriteString(message)
		return out.String()
	case n.prefix == "":
		return message
	}
	return strings.ReplaceAll(message, n.prefix, "")
}

// RoutingDomain is the engine's routing domain of a subject or binding
// pattern (broker.Config.RoutingDomain): the length of its first token
// when that begins with ReservedPrefix (a tenant account's), else 0 (the
// default account's). So the default account's wildcard bindings (">")
// never overlap a tenant's, nor route its subjects. It does not allocate.
func RoutingDomain(name []byte) int {
	if !Reserved(name) {
		return 0
	}
	for i, c := range name {
		if c == '.' {
			return i
		}
	}
	return len(name)
}

// ExportRule is one [[export]] entry of the auth config: the account
// Account lets the accounts To read its stream Stream. An importer names
// it "ACCOUNT/STREAM", may consume from it (its own subscribe scope must
// cover that name too) and do nothing else: publish, bind and every admin
// verb are refused. Its groups on the stream are its own (the engine's
// group "__IMPORTER.GROUP"), and every open of an imported stream is
// audited (action "import").
//
//	[[export]]
//	account = "acme"     # the owner ("default" for the default account)
//	stream = "orders"
//	to = ["beta"]
type ExportRule struct {
	Account string   `toml:"account" json:"account"`
	Stream  string   `toml:"stream" json:"stream"`
	To      []string `toml:"to,omitempty" json:"to"`
}

// exportKey is what compileExports indexes: an importer and the name it
// uses.
type exportKey struct{ importer, name string }

// compileExports checks the rules and indexes them by importer and name.
func compileExports(rules []ExportRule) (map[exportKey]bool, error) {
	out := map[exportKey]bool{}
	for i, rule := range rules {
		owner, err := accountOf(rule.Account)
		if err == nil && owner == OperatorAccount {
			err = fmt.Errorf("%w: the operator account owns no streams", ErrAuthConfig)
		}
		if err == nil && (rule.Stream == "" || strings.ContainsAny(rule.Stream, "/ \t\r\n") || Reserved(rule.Stream) || rule.Stream[0] == '.') {
			err = fmt.Errorf("%w: stream %q is not a stream name", ErrAuthConfig, rule.Stream)
		}
		for _, importer := range rule.To {
			if err == nil {
				if err = ValidateAccount(importer); err == nil && (importer == owner || importer == OperatorAccount) {
					err = fmt.Errorf("%w: an export to %q: the owner and the operator need none", ErrAuthConfig, importer)
				}
			}
			out[exportKey{importer: importer, name: owner + string(accountSeparator) + rule.Stream}] = true
		}
		if err != nil {
			return nil, fmt.Errorf("export %d: %w", i+1, err)
		}
	}
	return out, nil
}

// Imports reports whether the identity's account may read name, an
// "ACCOUNT/STREAM" another account exports to it.
func (id *Identity) Imports(name string) bool {
	return id.snapshot != nil && id.snapshot.exports[exportKey{importer: id.account, name: name}]
}

// CutImport splits a name a tenant uses for an import, "ACCOUNT/STREAM",
// and reports whether it is one.
func CutImport[Name string | []byte](name Name) (account, stream string, ok bool) {
	account, stream, ok = strings.Cut(string(name), string(accountSeparator))
	return account, stream, ok && account != "" && stream != ""
}

// ImportGroup is the engine's name of an importer's group on an
// imported stream.
func ImportGroup(importer string, group []byte) []byte {
	return append([]byte(ReservedPrefix+importer+"."), group...)
}

// Export lets importer read the owner's stream (nothing changes when it
// already may); with revoke set it takes that back, and reports
// ErrNoExport when there was nothing to take back.
func (f *AuthFile) Export(owner, stream, importer string, revoke bool) error {
	if owner == DefaultAccount {
		owner = ""
	}
	at := slices.IndexFunc(f.Exports, func(r ExportRule) bool { return r.Account == owner && r.Stream == stream })
	switch {
	case revoke && (at < 0 || !slices.Contains(f.Exports[at].To, importer)):
		return fmt.Errorf("%w: %q/%q to %q", ErrNoExport, cmp.Or(owner, DefaultAccount), stream, importer)
	case revoke:
		rule := &f.Exports[at]
		rule.To = slices.DeleteFunc(rule.To, func(to string) bool { return to == importer })
		if len(rule.To) == 0 {
			f.Exports = slices.Delete(f.Exports, at, at+1)
		}
	case at < 0:
		f.Exports = append(f.Exports, ExportRule{Account: owner, Stream: stream, To: []string{importer}})
	case !slices.Contains(f.Exports[at].To, importer):
		f.Exports[at].To = append(f.Exports[at].To, importer)
	}
	return nil
}

// ErrNoExport reports an export revoked that was never made.
var ErrNoExport = errors.New("security: no such export")

// SameAccount reports whether an engine's binding pattern and stream
// belong to one account, as every binding must: a route from one
// account's subjects into another's stream would cross the boundary.
func SameAccount(pattern, stream string) bool {
	patternAccount, _, _ := cutAccount(pattern)
	streamAccount, _, _ := cutAccount(stream)
	return patternAccount == streamAccount
}

// StreamAccount is the account an engine stream name belongs to: the
// tenant whose prefix it carries (its dead-letter queue's name too), else
// the default account. Quotas count a stream against this account.
func StreamAccount(engineName string) string {
	name := strings.TrimPrefix(engineName, deadLetterPrefix)
	if !strings.HasPrefix(name, ReservedPrefix) {
		return DefaultAccount
	}
	account, _, ok := strings.Cut(name[len(ReservedPrefix):], ".")
	if !ok || account == "" {
		return DefaultAccount
	}
	return account
}
