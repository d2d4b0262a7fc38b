//go:build !linux

package arena_test

import (
	"errors"
	"testing"

	"github.com/ironbus/ironbus/arena"
)

func TestReadRSSUnsupported(t *testing.T) {
	if _, err := arena.ReadRSS(); !errors.Is(err, arena.ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("ReadRSS = %v, want ErrUnsupported", err)
	}
}
