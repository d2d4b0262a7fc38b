package security

import (
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// encodeAuthFile writes file as the TOML ParseAuthFile reads: one
// [[identity]] table an entry, one [[group]] table a group rule and one
// [[account_quota]] table an account's quotas, keys
// in their structs' field order, and
// an empty string, an empty list or a zero quota left out (absent is the
// same as empty to the decoder). It is written by hand because the file
// has one fixed shape, and go-toml's reflection-driven encoder would cost
// about 0.1 MB of the binary for it (docs/PACKAGING.md).
func encodeAuthFile(file AuthFile) []byte {
	var out []byte
	if len(file.Identities) == 0 {
		out = append(out, "identity = []\n"...)
	}
	for i, entry := range file.Identities {
		if i > 0 {
			out = append(out, '\n')
		}
		out = append(out, "[[identity]]\n"...)
		out = appendStringKey(out, "name", entry.Name)
		out = appendStringKey(out, "account", entry.Account)
		out = appendStringKey(out, "token_sha256", entry.TokenSHA256)
		out = appendStringKey(out, "password_hash", entry.PasswordHash)
		out = appendStringKey(out, "mtls_identity", entry.MTLSIdentity)
		out = appendListKey(out, "publish", entry.Publish)
		out = appendListKey(out, "subscribe", entry.Subscribe)
		out = appendListKey(out, "admin", entry.Admin)
		out = appendListKey(out, "publish_subjects", entry.PublishSubjects)
		out = appendListKey(out, "subscribe_subjects", entry.SubscribeSubjects)
		out = appendListKey(out, "deny_publish", entry.DenyPublish)
		out = appendListKey(out, "deny_subscribe", entry.DenySubscribe)
		out = appendListKey(out, "deny_admin", entry.DenyAdmin)
		out = appendListKey(out, "deny_publish_subjects", entry.DenyPublishSubjects)
		out = appendListKey(out, "deny_subscribe_subjects", entry.DenySubscribeSubjects)
		out = appendQuotaKeys(out, entry.Limits())
		out = appendTimeKey(out, "expires", entry.Expires)
	}
	for _, rule := range file.Groups {
		out = append(out, "\n[[group]]\n"...)
		out = appendQuotedKey(out, "stream", rule.Stream)
		out = appendQuotedKey(out, "group", rule.Group)
		out = appendListKey(out, "join", rule.Join)
		out = appendListKey(out, "commit", rule.Commit)
		out = appendListKey(out, "reset", rule.Reset)
		out = appendListKey(out, "deny_join", rule.DenyJoin)
		out = appendListKey(out, "deny_commit", rule.DenyCommit)
		out = appendListKey(out, "deny_reset", rule.DenyReset)
	}
	for _, account := range file.Accounts {
		out = append(out, "\n[[account_quota]]\n"...)
		out = appendQuotedKey(out, "account", account.Account)
		out = appendQuotaKeys(out, account.Limits())
	}
	for _, rule := range file.Exports {
		out = append(out, "\n[[export]]\n"...)
		out = appendQuotedKey(out, "account", rule.Account)
		out = appendQuotedKey(out, "stream", rule.Stream)
		out = appendListKey(out, "to", rule.To)
	}
	return out
}

// appendQuotaKeys writes the quota keys an identity and an account share.
func appendQuotaKeys(out []byte, limits QuotaLimits) []byte {
	out = appendFloatKey(out, "publish_messages_per_second", limits.MessagesPerSecond)
	out = appendFloatKey(out, "publish_bytes_per_second", limits.BytesPerSecond)
	out = appendIntKey(out, "max_connections", limits.Connections)
	out = appendIntKey(out, "max_streams", limits.Streams)
	out = appendIntKey(out, "max_partitions", limits.Partitions)
	return appendIntKey(out, "max_stored_bytes", limits.StoredBytes)
}

func appendIntKey(out []byte, key string, value int64) []byte {
	if value == 0 {
		return out
	}
	out = append(append(out, key...), " = "...)
	return append(strconv.AppendInt(out, value, 10), '\n')
}

// appendQuotedKey writes key = "value" whatever the value.
func appendQuotedKey(out []byte, key, value string) []byte {
	out = append(append(out, key...), " = "...)
	return append(appendTOMLString(out, value), '\n')
}

// appendStringKey writes key = "value", the name always and any other
// key only when set.
func appendStringKey(out []byte, key, value string) []byte {
	if value == "" && key != "name" {
		return out
	}
	out = append(append(out, key...), " = "...)
	return append(appendTOMLString(out, value), '\n')
}

func appendListKey(out []byte, key string, values []string) []byte {
	if len(values) == 0 {
		return out
	}
	out = append(append(out, key...), " = ["...)
	for i, value := range values {
		if i > 0 {
			out = append(out, ", "...)
		}
		out = appendTOMLString(out, value)
	}
	return append(out, "]\n"...)
}

func appendFloatKey(out []byte, key string, value float64) []byte {
	if value == 0 {
		return out
	}
	out = append(append(out, key...), " = "...)
	switch {
	case math.IsNaN(value):
		out = append(out, "nan"...)
	case math.IsInf(value, 1):
		out = append(out, "inf"...)
	case math.IsInf(value, -1):
		out = append(out, "-inf"...)
	default:
		start := len(out)
		out = strconv.AppendFloat(out, value, 'f', -1, 64)
		// A TOML float needs a fraction (or exponent): 1000 would be an
		// integer.
		if !strings.Contains(string(out[start:]), ".") {
			out = append(out, ".0"...)
		}
	}
	return append(out, '\n')
}

// appendTimeKey writes key = an offset date-time (RFC 3339, to the
// nanosecond when it has one), left out when zero.
func appendTimeKey(out []byte, key string, value time.Time) []byte {
	if value.IsZero() {
		return out
	}
	out = append(append(out, key...), " = "...)
	return append(value.AppendFormat(out, time.RFC3339Nano), '\n')
}

// appendTOMLString writes text as a literal string ('…', taken as it
// stands) when it can be one, else as a basic string ("…") with TOML's
// escapes. Invalid UTF-8, which TOML cannot hold, becomes U+FFFD.
func appendTOMLString(out []byte, text string) []byte {
	literal := utf8.ValidString(text)
	for i := 0; i < len(text) && literal; i++ {
		literal = text[i] != '\'' && text[i] >= 0x20 && text[i] != 0x7f
	}
	if literal {
		return append(append(append(out, '\''), text...), '\'')
	}
	out = append(out, '"')
	for _, r := range text {
		switch r {
		case '"', '\\':
			out = append(out, '\\', byte(r))
		case '\b':
			out = append(out, `\b`...)
		case '\t':
			out = append(out, `\t`...)
		case '\n':
			out = append(out, `\n`...)
		case '\f':
			out = append(out, `\f`...)
		case '\r':
			out = append(out, `\r`...)
		default:
			if r < 0x20 || r == 0x7f {
				out = append(out, `\u00`...)
				out = append(out, "0123456789ABCDEF"[r>>4], "0123456789ABCDEF"[r&0xf])
				continue
			}
			out = utf8.AppendRune(out, r)
		}
	}
	return append(out, '"')
}
