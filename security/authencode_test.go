package security

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// TestEncodeAuthFileLayout pins the layout `ironbus auth` writes.
func TestEncodeAuthFileLayout(t *testing.T) {
	file := AuthFile{Identities: []IdentityEntry{
		{Name: "orders-writer", TokenSHA256: "9f86d0", Publish: []string{"orders.>", "it's"}, Admin: []string{},
			PublishMessagesPerSecond: 1000, PublishBytesPerSecond: 1.5},
		{Name: "device", MTLSIdentity: "spiffe://edge/device-1", Subscribe: []string{"*"}},
	}}
	want := `[[identity]]
name = 'orders-writer'
token_sha256 = '9f86d0'
publish = ['orders.>', "it's"]
publish_messages_per_second = 1000.0
publish_bytes_per_second = 1.5

[[identity]]
name = 'device'
mtls_identity = 'spiffe://edge/device-1'
subscribe = ['*']
`
	if got := string(encodeAuthFile(file)); got != want {
		t.Fatalf("encodeAuthFile:\n%s\nwant:\n%s", got, want)
	}
	if got := string(encodeAuthFile(AuthFile{})); got != "identity = []\n" {
		t.Fatalf("an empty file encodes as %q", got)
	}
}

// TestEncodeAuthFileRoundTrip: whatever a field holds, a TOML decoder
// reads back what was written.
func TestEncodeAuthFileRoundTrip(t *testing.T) {
	awkward := []string{"plain", "", "it's", `back\slash`, `"quoted"`, "tab\tnew\nline\rcr\bbs\fff", "\x00\x01\x1f\x7f",
		"é ünïcode ✓ 𝄞", "'", `'''`, `"""`, "ends with \\"}
	for _, text := range awkward {
		entry := IdentityEntry{Name: text, PasswordHash: text, Publish: []string{text, "x"}, Subscribe: []string{text},
			PublishMessagesPerSecond: 0.1, PublishBytesPerSecond: 1e21}
		var decoded AuthFile
		if err := toml.Unmarshal(encodeAuthFile(AuthFile{Identities: []IdentityEntry{entry}}), &decoded); err != nil {
			t.Fatalf("%q: %v\n%s", text, err, encodeAuthFile(AuthFile{Identities: []IdentityEntry{entry}}))
		}
		if text == "" {
			entry.PasswordHash = "" // an empty credential is left out, as absent
		}
		if len(decoded.Identities) != 1 || !reflect.DeepEqual(decoded.Identities[0], entry) {
			t.Fatalf("%q: decoded %+v, want %+v", text, decoded.Identities, entry)
		}
	}
	var decoded AuthFile
	entry := IdentityEntry{Name: "bad\xffutf8", PublishMessagesPerSecond: math.Inf(1), PublishBytesPerSecond: 3}
	if err := toml.Unmarshal(encodeAuthFile(AuthFile{Identities: []IdentityEntry{entry}}), &decoded); err != nil {
		t.Fatal(err)
	}
	if got := decoded.Identities[0]; got.Name != "bad\uFFFDutf8" || !math.IsInf(got.PublishMessagesPerSecond, 1) || got.PublishBytesPerSecond != 3 {
		t.Fatalf("invalid UTF-8 and an infinite quota decoded as %+v", got)
	}
}

// TestEncodeAuthFileWritesEveryField guards the hand-written encoder
// against a field added to the file's structs and never written: every
// field of every table is set (by reflection, so a new field is covered
// without editing this test) and must decode back.
func TestEncodeAuthFileWritesEveryField(t *testing.T) {
	fill := func(value reflect.Value) {
		for i := range value.NumField() {
			field := value.Field(i)
			switch field.Kind() {
			case reflect.String:
				field.SetString("v-" + value.Type().Field(i).Name)
			case reflect.Slice:
				field.Set(reflect.ValueOf([]string{"a." + value.Type().Field(i).Name, "b"}))
			case reflect.Float64:
				field.SetFloat(float64(i) + 0.5)
			case reflect.Struct:
				if field.Type() != reflect.TypeFor[time.Time]() {
					t.Fatalf("%s.%s: a %s field; teach encodeAuthFile and this test its type",
						value.Type().Name(), value.Type().Field(i).Name, field.Type())
				}
				field.Set(reflect.ValueOf(time.Date(2027, 1, 2, 3, 4, 5, 6000+i, time.UTC)))
			case reflect.Int64:
				field.SetInt(int64(i) + 1)
			default:
				t.Fatalf("%s.%s: a %s field; teach encodeAuthFile and this test its kind",
					value.Type().Name(), value.Type().Field(i).Name, field.Kind())
			}
		}
	}
	var entry IdentityEntry
	var rule GroupRule
	var export ExportRule
	var account AccountQuota
	fill(reflect.ValueOf(&entry).Elem())
	fill(reflect.ValueOf(&rule).Elem())
	fill(reflect.ValueOf(&export).Elem())
	fill(reflect.ValueOf(&account).Elem())
	file := AuthFile{Identities: []IdentityEntry{entry}, Groups: []GroupRule{rule}, Exports: []ExportRule{export},
		Accounts: []AccountQuota{account}}
	if fields := reflect.TypeOf(file).NumField(); fields != 4 {
		t.Fatalf("AuthFile has %d tables; encodeAuthFile writes identity, group, export and account_quota", fields)
	}
	var decoded AuthFile
	if err := toml.Unmarshal(encodeAuthFile(file), &decoded); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(decoded, file) {
		t.Fatalf("decoded\n%+v\nwant\n%+v\nfrom:\n%s", decoded, file, encodeAuthFile(file))
	}
}
