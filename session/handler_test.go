package session

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/wire"
)

// TestEveryEngineErrorHasAWireCode: each kind the engine returns maps to
// its own wire code (only a storage failure is internal), the message is
// the engine's text, and a retryable error carries its hint.
func TestEveryEngineErrorHasAWireCode(t *testing.T) {
	for _, pair := range errorCodes {
		err := fmt.Errorf("%w: stream %q", pair.kind, "orders")
		e := wireError(err)
		if e.Code != pair.code || e.Code == wire.CodeInternal || e.Message != err.Error() {
			t.Errorf("%v: code %v message %q; want %v and the engine's text", pair.kind, e.Code, e.Message, pair.code)
		}
	}
	if e := wireError(fmt.Errorf("%w: disk", broker.ErrStorage)); e.Code != wire.CodeInternal {
		t.Errorf("a storage failure: %v", e.Code)
	}
	retry := &broker.RetryableError{Err: fmt.Errorf("%w: budget used up", broker.ErrNoSpace), RetryAfter: 2 * time.Second}
	if e := wireError(retry); e.Code != wire.CodeNoSpace || e.RetryAfter != 2*time.Second {
		t.Errorf("a retryable no-space error: %+v", e)
	}
	if e := wireError(errors.Join(wire.NewError(wire.CodeBusy, "already wire"))); e.Code != wire.CodeBusy {
		t.Errorf("a wire error passes through: %+v", e)
	}
}

func TestNewHandlerRefusesABadConfig(t *testing.T) {
	if _, err := NewHandler(nil, Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("no engine: %v", err)
	}
	b, err := broker.Open(broker.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, cfg := range []Config{{MaxFrame: 1}, {Window: MaxWindow + 1}} {
		if _, err := NewHandler(b, cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}
