package security

import (
	"errors"
	"slices"
	"testing"
)

func TestAuthFileEdits(t *testing.T) {
	var file AuthFile
	writer := IdentityEntry{Name: "writer", TokenSHA256: TokenDigest("a")}
	writer.Grant(ScopePublish, []string{"orders.>"})
	writer.Grant(ScopeAdmin, []string{">"})
	if !slices.Equal(writer.Patterns(ScopePublish), []string{"orders.>"}) || writer.Patterns(ScopeSubscribe) != nil ||
		!slices.Equal(writer.Patterns(ScopeAdmin), []string{">"}) {
		t.Fatalf("grants: %+v", writer)
	}
	if err := file.Put(writer, false); err != nil {
		t.Fatal(err)
	}
	again := IdentityEntry{Name: "writer", PasswordHash: "x"}
	if err := file.Put(again, false); !errors.Is(err, ErrIdentityExists) || file.Identities[0].Mechanism() != "token" {
		t.Fatalf("a second writer without replace: %v %+v", err, file)
	}
	if err := file.Put(again, true); err != nil || len(file.Identities) != 1 || file.Identities[0].Mechanism() != "password" {
		t.Fatalf("replace: %v %+v", err, file)
	}
	if _, err := file.Remove("reader"); !errors.Is(err, ErrNoIdentity) {
		t.Fatalf("remove a missing identity: %v", err)
	}
	if removed, err := file.Remove("writer"); err != nil || removed.Mechanism() != "password" || len(file.Identities) != 0 {
		t.Fatalf("remove: %+v %v %+v", removed, err, file)
	}
}
