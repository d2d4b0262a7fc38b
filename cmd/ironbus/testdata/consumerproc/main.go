// Command consumerproc is a consumer process for the end-to-end tests: it
// leases records and holds them until told to acknowledge, so a test can
// kill it with -9 or freeze it with SIGSTOP while it holds the leases.
//
//	consumerproc ADDR STREAM GROUP COUNT LEASE
//
// It prints "leased N" once it holds N leases, then for each "ack" line
// on stdin acknowledges them all and prints "acked ok=… fenced=…".
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/ironbus/ironbus/client"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "consumerproc:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 5 {
		return fmt.Errorf("usage: consumerproc ADDR STREAM GROUP COUNT LEASE")
	}
	count, err := strconv.Atoi(args[3])
	if err != nil {
		return err
	}
	lease, err := time.ParseDuration(args[4])
	if err != nil {
		return err
	}
	ctx := context.Background()
	c, err := client.Dial(ctx, args[0], client.Options{ClientName: "consumerproc"})
	if err != nil {
		return err
	}
	defer c.Close()
	var held []client.Message
	for len(held) < count {
		result, err := c.Fetch(ctx, args[1], args[2], client.FetchOptions{MaxRecords: count - len(held), Lease: lease, Wait: time.Second})
		if err != nil {
			return err
		}
		held = append(held, result.Messages...)
	}
	fmt.Printf("leased %d\n", len(held))
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		if lines.Text() != "ack" {
			continue
		}
		statuses, err := c.Ack(ctx, args[1], args[2], held...)
		if err != nil {
			return err
		}
		ok := 0
		for _, status := range statuses {
			if status == client.AckOK {
				ok++
			}
		}
		fmt.Printf("acked ok=%d fenced=%d\n", ok, len(statuses)-ok)
	}
	return nil
}
