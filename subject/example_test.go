package subject_test

import (
	"errors"
	"fmt"

	"github.com/ironbus/ironbus/subject"
)

// The broker keeps one Router; admin requests update it, and each
// connection routes its publishes through its own Cache.
func Example() {
	router := subject.NewRouter(nil)
	bind := func(pattern, stream string) error {
		return router.Update(func(table *subject.Table) (*subject.Table, error) {
			return table.Bind(pattern, stream)
		})
	}
	fmt.Println(bind("orders.eu.*", "orders-eu"))
	fmt.Println(bind("orders.us.>", "orders-us"))
	err := bind("orders.*.created", "audit")
	fmt.Println(errors.Is(err, subject.ErrAmbiguous), err)

	var cache subject.Cache // one per connection
	fmt.Println(cache.Lookup(router, []byte("orders.us.west.created")))
	fmt.Println(cache.Lookup(router, []byte("orders.asia.created")))
	fmt.Println(router.Table().StreamsMatching([]byte("orders.>")))
	fmt.Println(subject.Validate([]byte("orders.eu..created")))
	// Output:
	// <nil>
	// <nil>
	// true subject: ambiguous binding: pattern "orders.*.created" for stream "audit" overlaps the binding of "orders.eu.*" to stream "orders-eu"
	// orders-us true
	//  false
	// [orders-eu orders-us]
	// subject: invalid subject: empty token at byte 10 (token 2)
}
