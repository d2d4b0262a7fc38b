package loop

func newEpollServer(cfg Config, handler Handler) (Server, error) {
	return NewEpoll(cfg, handler)
}
