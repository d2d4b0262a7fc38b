package client

import (
	"context"
	"fmt"

	"github.com/ironbus/ironbus/subject"
)

// subjectBindings reads the broker's subject bindings.
func (c *Client) subjectBindings(ctx context.Context) ([]subject.Binding, error) {
	_ = ctx
	return nil, fmt.Errorf("%w: reading the broker's bindings is not served yet", ErrInvalidArgument)
}
