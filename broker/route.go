package broker

import "github.com/ironbus/ironbus/wire"

// routeSubject returns the stream whose binding matches a record's
// subject.
func (s *session) routeSubject(subject []byte) ([]byte, *wire.Error) {
	return nil, wire.NewError(wire.CodeNoRoute, "no binding matches subject %q", subject)
}
