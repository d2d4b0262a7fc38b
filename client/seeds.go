package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/ironbus/ironbus/wire"
)

// clientCapabilities is what the client announces in Hello: every
// capability the broker may have, and cluster, which a broker announces
// only as a member of a replicated cluster (it serves ClusterInfo and
// names the leader in not_leader). The broker's own set, wire.Capabilities,
// gains the bit only when the server serves it; Welcome's intersection
// decides what is in effect.
const clientCapabilities = wire.Capabilities | wire.CapCluster

// ErrNoSeeds: an address list to dial holds no address.
var ErrNoSeeds = errors.New("ironbus client: no address to dial")

// ParseSeeds splits a seed list ("a:7001,b:7002") into its addresses,
// trimming spaces and dropping duplicates; one address is a list of
// one. Each must be host:port.
func ParseSeeds(list string) ([]string, error) {
	var seeds []string
	for _, addr := range strings.Split(list, ",") {
		addr = strings.TrimSpace(addr)
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%w: address %q: %w", ErrInvalidArgument, addr, err)
		}
		duplicate := false
		for _, seen := range seeds {
			duplicate = duplicate || seen == addr
		}
		if !duplicate {
			seeds = append(seeds, addr)
		}
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("%w: %q", ErrNoSeeds, list)
	}
	return seeds, nil
}

// dialSeeds tries the seeds in order, starting at from and wrapping
// around, until one completes the handshake; it returns the connection
// and the index of its seed. The error of a failure names every address
// tried and joins their errors, so errors.Is finds any of them.
func dialSeeds(ctx context.Context, seeds []string, from int, opts Options) (*Client, int, error) {
	var errs []error
	var tried []string
	for i := range seeds {
		at := (from + i) % len(seeds)
		c, err := dialOne(ctx, seeds[at], opts)
		if err == nil {
			return c, at, nil
		}
		errs, tried = append(errs, err), append(tried, seeds[at])
		if _, werr := wireCode(err); (werr != nil && !werr.Retryable) || ctx.Err() != nil {
			break // every member would refuse the same; or the caller gave up
		}
	}
	if len(seeds) == 1 {
		return nil, from, errs[0]
	}
	return nil, from, fmt.Errorf("ironbus client: no seed answered (tried %s): %w",
		strings.Join(tried, ", "), errors.Join(errs...))
}
