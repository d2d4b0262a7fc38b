package wire

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecodeAuth: any mechanism and material either decodes or is
// ErrAuthMaterial, never panics, and password material round-trips.
func FuzzDecodeAuth(f *testing.F) {
	f.Add(uint8(AuthNone), []byte{})
	f.Add(uint8(AuthToken), []byte("ibt_abc"))
	f.Add(uint8(AuthPassword), AppendPasswordMaterial(nil, "alice", []byte("secret")))
	f.Add(uint8(AuthPassword), []byte{0xff, 0xff, 'a'})
	f.Add(uint8(AuthMTLS), []byte{1})
	f.Add(uint8(9), []byte{})
	f.Fuzz(func(t *testing.T, mechanism uint8, material []byte) {
		c, err := DecodeAuth(mechanism, material)
		if err != nil {
			if !errors.Is(err, ErrAuthMaterial) {
				t.Fatalf("error %v does not wrap ErrAuthMaterial", err)
			}
			return
		}
		if c.Mechanism != mechanism {
			t.Fatalf("mechanism %d became %d", mechanism, c.Mechanism)
		}
		if mechanism == AuthPassword {
			again := AppendPasswordMaterial(nil, c.Username, c.Password)
			if !bytes.Equal(again, material) {
				t.Fatalf("password material does not round-trip: %x vs %x", again, material)
			}
		}
	})
}

func TestDecodeAuthCases(t *testing.T) {
	c, err := DecodeAuth(AuthPassword, AppendPasswordMaterial(nil, "alice", []byte("pw")))
	if err != nil || c.Username != "alice" || string(c.Password) != "pw" {
		t.Fatalf("password: %+v %v", c, err)
	}
	for _, bad := range []struct {
		mechanism uint8
		material  []byte
	}{{AuthToken, nil}, {AuthPassword, []byte{5, 0, 'a'}}, {AuthPassword, AppendPasswordMaterial(nil, "a", nil)}, {AuthMTLS, []byte{1}}, {77, nil}} {
		if _, err := DecodeAuth(bad.mechanism, bad.material); !errors.Is(err, ErrAuthMaterial) {
			t.Errorf("DecodeAuth(%d, %x) = %v, want ErrAuthMaterial", bad.mechanism, bad.material, err)
		}
	}
}
