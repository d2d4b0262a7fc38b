package subject_test

import (
	"fmt"
	"testing"

	"github.com/ironbus/ironbus/subject"
)

// benchmarkTable binds count patterns: nine in ten literal
// ("tenant.N.orders.created"), one in ten wildcard ("tenant.N.events.*" or
// "tenant.N.audit.>"), the mix a deployment with per-tenant streams has.
// It returns subjects that hit literal and wildcard bindings alike.
func benchmarkTable(b *testing.B, count int) (*subject.Table, [][]byte) {
	bindings := make([]subject.Binding, 0, count)
	var subjects [][]byte
	for index := range count {
		stream := fmt.Sprintf("stream-%d", index%64)
		var pattern, hit string
		switch {
		case index%20 == 1:
			pattern, hit = fmt.Sprintf("tenant.%d.events.*", index), fmt.Sprintf("tenant.%d.events.login", index)
		case index%20 == 11:
			pattern, hit = fmt.Sprintf("tenant.%d.audit.>", index), fmt.Sprintf("tenant.%d.audit.eu.west", index)
		default:
			pattern, hit = fmt.Sprintf("tenant.%d.orders.created", index), fmt.Sprintf("tenant.%d.orders.created", index)
		}
		bindings = append(bindings, subject.Binding{Pattern: pattern, Stream: stream})
		if len(subjects) < 64 {
			subjects = append(subjects, []byte(hit))
		}
	}
	table, err := subject.NewTable(bindings...)
	if err != nil {
		b.Fatal(err)
	}
	return table, subjects
}

func BenchmarkLookup(b *testing.B) {
	for _, count := range []int{1, 1000, 10000} {
		table, subjects := benchmarkTable(b, count)
		b.Run(fmt.Sprintf("bindings=%d", count), func(b *testing.B) {
			b.ReportAllocs()
			for index := 0; b.Loop(); index++ {
				if _, ok := table.Lookup(subjects[index%len(subjects)]); !ok {
					b.Fatal("no route")
				}
			}
		})
	}
	table, _ := benchmarkTable(b, 10000)
	b.Run("bindings=10000/wildcard", func(b *testing.B) {
		subject := []byte("tenant.9991.audit.eu.west")
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := table.Lookup(subject); !ok {
				b.Fatal("no route")
			}
		}
	})
	b.Run("bindings=10000/miss", func(b *testing.B) {
		subject := []byte("tenant.9990.unknown.x")
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := table.Lookup(subject); ok {
				b.Fatal("routed")
			}
		}
	})
}

func BenchmarkCacheHit(b *testing.B) {
	table, subjects := benchmarkTable(b, 10000)
	router := subject.NewRouter(table)
	var cache subject.Cache
	subjects = subjects[:16]
	for _, s := range subjects {
		cache.Lookup(router, s)
	}
	b.ReportAllocs()
	for index := 0; b.Loop(); index++ {
		if _, ok := cache.Lookup(router, subjects[index%len(subjects)]); !ok {
			b.Fatal("no route")
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	pattern, err := subject.Compile([]byte("orders.*.created.>"))
	if err != nil {
		b.Fatal(err)
	}
	hit, miss := []byte("orders.eu.created.vip.42"), []byte("orders.eu.cancelled.vip.42")
	b.Run("pattern/hit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !pattern.Match(hit) {
				b.Fatal("no match")
			}
		}
	})
	b.Run("pattern/miss", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if pattern.Match(miss) {
				b.Fatal("match")
			}
		}
	})
	b.Run("func/hit", func(b *testing.B) {
		text := []byte(pattern.String())
		b.ReportAllocs()
		for b.Loop() {
			if !subject.Match(text, hit) {
				b.Fatal("no match")
			}
		}
	})
}

func BenchmarkValidate(b *testing.B) {
	input := []byte("orders.eu.created.vip.42")
	b.ReportAllocs()
	for b.Loop() {
		if subject.Validate(input) != nil {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkBind(b *testing.B) {
	table, _ := benchmarkTable(b, 10000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := table.Bind("tenant.77777.orders.created", "s"); err != nil {
			b.Fatal(err)
		}
	}
}
