package loop

// newURingServer is replaced when the io_uring backend lands.
func newURingServer(Config, Handler) (Server, error) { return nil, ErrUnsupported }
