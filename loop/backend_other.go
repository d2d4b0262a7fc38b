//go:build !linux

package loop

func newEpollServer(Config, Handler) (Server, error) { return nil, ErrUnsupported }

func newURingServer(Config, Handler) (Server, error) { return nil, ErrUnsupported }

func uringUsable() error { return ErrUnsupported }
