package loop

import (
	"errors"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/loop/uring"
)

// TestAutoFallsBack: where io_uring cannot run (forced here through
// IRONBUS_URING_DISABLE, which Detect reads on every call), auto takes
// epoll and says why, and asking for uring by name is an error.
func TestAutoFallsBack(t *testing.T) {
	t.Setenv(uring.DisableEnvironment, "1")
	server, choice, err := New(BackendAuto, Config{Loops: 1}, echoHandler{})
	if err != nil {
		t.Fatal(err)
	}
	closeUnused(server)
	if choice.Backend != BackendEpoll || server.Backend() != BackendEpoll {
		t.Fatalf("auto chose %s (%s), want epoll", choice.Backend, choice.Reason)
	}
	if !strings.Contains(choice.Reason, "io_uring") || !strings.Contains(choice.Reason, uring.DisableEnvironment) {
		t.Fatalf("Choice.Reason %q does not say why io_uring was passed over", choice.Reason)
	}
	_, _, err = New(BackendURing, Config{Loops: 1}, echoHandler{})
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("New(uring) with io_uring disabled returned %v, want ErrUnsupported", err)
	}
	if err := Available(BackendURing); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Available(uring) = %v, want ErrUnsupported", err)
	}
}

// TestURingRefusal: a kernel whose io_uring works but lacks what the
// backend needs is refused with the missing pieces named.
func TestURingRefusal(t *testing.T) {
	for _, test := range []struct {
		name         string
		capabilities uring.Capabilities
		want         string // in the reason; "" means accepted
	}{
		{"unavailable", uring.Capabilities{Reason: "io_uring_setup refused: EPERM"}, "EPERM"},
		{"no multishot recv", uring.Capabilities{Available: true, Kernel: "5.19.0", MultishotAccept: true, BufferRing: true}, "multishot recv"},
		{"no buffer ring", uring.Capabilities{Available: true, Kernel: "5.15.0"}, "provided-buffer rings"},
		{"complete", uring.Capabilities{Available: true, MultishotAccept: true, MultishotRecv: true, BufferRing: true}, ""},
	} {
		t.Run(test.name, func(t *testing.T) {
			reason := uringRefusal(test.capabilities)
			if test.want == "" && reason != "" || !strings.Contains(reason, test.want) {
				t.Fatalf("refusal %q, want one mentioning %q", reason, test.want)
			}
		})
	}
}
