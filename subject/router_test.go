package subject_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ironbus/ironbus/subject"
)

func TestRouterUpdate(t *testing.T) {
	router := subject.NewRouter(nil)
	if router.Table().Len() != 0 || router.Generation() != 0 {
		t.Fatal("a new router is not empty at generation 0")
	}
	bind := func(pattern, stream string) func(*subject.Table) (*subject.Table, error) {
		return func(table *subject.Table) (*subject.Table, error) { return table.Bind(pattern, stream) }
	}
	if err := router.Update(bind("a.*", "s")); err != nil {
		t.Fatal(err)
	}
	if router.Generation() != 1 {
		t.Errorf("generation %d after one update, want 1", router.Generation())
	}
	if err := router.Update(bind("a.*", "s")); err != nil || router.Generation() != 1 {
		t.Errorf("idempotent bind: %v, generation %d, want 1", err, router.Generation())
	}
	if err := router.Update(bind("a.b", "t")); !errors.Is(err, subject.ErrAmbiguous) || router.Generation() != 1 {
		t.Errorf("refused bind: %v, generation %d, want ErrAmbiguous at 1", err, router.Generation())
	}
	noTable := func(*subject.Table) (*subject.Table, error) { return nil, nil }
	if err := router.Update(noTable); !errors.Is(err, subject.ErrNoTable) || router.Table().Len() != 1 {
		t.Errorf("nil table: %v, %d bindings", err, router.Table().Len())
	}
}

func TestCacheFollowsUpdates(t *testing.T) {
	router := subject.NewRouter(mustTable(t, subject.Binding{Pattern: "a.*", Stream: "s"}))
	var cache subject.Cache
	for range 2 {
		if stream, ok := cache.Lookup(router, []byte("a.b")); !ok || stream != "s" {
			t.Fatalf("Lookup(a.b) = %q, %v", stream, ok)
		}
		if _, ok := cache.Lookup(router, []byte("c")); ok {
			t.Fatal("c routes before it is bound")
		}
	}
	if err := router.Update(func(table *subject.Table) (*subject.Table, error) { return table.Bind("c", "t") }); err != nil {
		t.Fatal(err)
	}
	if stream, ok := cache.Lookup(router, []byte("c")); !ok || stream != "t" {
		t.Errorf("after binding c: Lookup(c) = %q, %v (stale cache)", stream, ok)
	}
	if err := router.Update(func(table *subject.Table) (*subject.Table, error) { return table.Unbind("a.*") }); err != nil {
		t.Fatal(err)
	}
	if stream, ok := cache.Lookup(router, []byte("a.b")); ok {
		t.Errorf("after unbinding a.*: Lookup(a.b) = %q (stale cache)", stream)
	}
	other := subject.NewRouter(mustTable(t, subject.Binding{Pattern: "a.b", Stream: "other"}))
	if stream, ok := cache.Lookup(other, []byte("a.b")); !ok || stream != "other" {
		t.Errorf("another router: Lookup(a.b) = %q, %v (answered from the first router)", stream, ok)
	}
}

func TestCacheIsBounded(t *testing.T) {
	router := subject.NewRouter(mustTable(t, subject.Binding{Pattern: ">", Stream: "all"}))
	var cache subject.Cache
	for index := range 10 * subject.CacheEntries {
		if stream, ok := cache.Lookup(router, fmt.Appendf(nil, "s.%d", index)); !ok || stream != "all" {
			t.Fatalf("Lookup(s.%d) = %q, %v", index, stream, ok)
		}
		if cache.Len() > subject.CacheEntries {
			t.Fatalf("the cache holds %d entries, over %d", cache.Len(), subject.CacheEntries)
		}
	}
	long := make([]byte, subject.MaxLength+1)
	for index := range long {
		long[index] = 'a'
	}
	before := cache.Len()
	if _, ok := cache.Lookup(router, long); ok || cache.Len() != before {
		t.Errorf("an over-long subject: routed %v, cache %d → %d entries", ok, before, cache.Len())
	}
}

// TestConcurrentLookupsDuringUpdates is for the race detector: readers
// look up (directly and through their own caches) while a writer binds
// and unbinds. A reader must always see either the old or the new route
// of the subject being flipped, never a third answer.
func TestConcurrentLookupsDuringUpdates(t *testing.T) {
	router := subject.NewRouter(mustTable(t, subject.Binding{Pattern: "fixed.>", Stream: "fixed"}))
	var stop atomic.Bool
	var readers sync.WaitGroup
	for reader := range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			var cache subject.Cache
			for !stop.Load() {
				if stream, ok := cache.Lookup(router, []byte("fixed.a")); !ok || stream != "fixed" {
					t.Errorf("reader %d: fixed.a routed to %q, %v", reader, stream, ok)
					return
				}
				stream, ok := router.Table().Lookup([]byte("flip.x"))
				if ok && stream != "even" && stream != "odd" {
					t.Errorf("reader %d: flip.x routed to %q", reader, stream)
					return
				}
			}
		}()
	}
	for round := range 500 {
		stream := []string{"even", "odd"}[round%2]
		err := router.Update(func(table *subject.Table) (*subject.Table, error) {
			if _, ok := table.Lookup([]byte("flip.x")); ok {
				return table.Unbind("flip.*")
			}
			return table.Bind("flip.*", stream)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	readers.Wait()
	if router.Generation() != 500 {
		t.Errorf("generation %d after 500 updates", router.Generation())
	}
}

func TestHotPathsDoNotAllocate(t *testing.T) {
	table := mustTable(t,
		subject.Binding{Pattern: "orders.eu.*", Stream: "eu"},
		subject.Binding{Pattern: "orders.us.>", Stream: "us"},
		subject.Binding{Pattern: "audit.login", Stream: "audit"},
	)
	router := subject.NewRouter(table)
	pattern, err := subject.Compile([]byte("orders.*.>"))
	if err != nil {
		t.Fatal(err)
	}
	var cache subject.Cache
	hit := []byte("orders.us.west.created")
	cache.Lookup(router, hit)
	miss := []byte("nowhere.at.all")
	checks := map[string]func(){
		"Table.Lookup hit":  func() { table.Lookup(hit) },
		"Table.Lookup miss": func() { table.Lookup(miss) },
		"Match":             func() { subject.Match([]byte("orders.*.>"), hit) },
		"Pattern.Match":     func() { pattern.Match(hit) },
		"Validate":          func() { _ = subject.Validate(hit) },
		"Cache hit":         func() { cache.Lookup(router, hit) },
	}
	for name, check := range checks {
		if allocations := testing.AllocsPerRun(200, check); allocations != 0 {
			t.Errorf("%s: %.1f allocations per run, want 0", name, allocations)
		}
	}
	if stream, ok := cache.Lookup(router, hit); !ok || stream != "us" {
		t.Errorf("cache: %q, %v", stream, ok)
	}
}

func TestCacheMissAllocatesOnlyItsKey(t *testing.T) {
	router := subject.NewRouter(mustTable(t, subject.Binding{Pattern: "s.*", Stream: "s"}))
	var cache subject.Cache
	subjects := make([][]byte, subject.CacheEntries*2)
	for index := range subjects {
		subjects[index] = fmt.Appendf(nil, "s.%d", index)
	}
	cache.Lookup(router, []byte("s.warm")) // the first call sizes the map
	next := 0
	allocations := testing.AllocsPerRun(subject.CacheEntries, func() {
		cache.Lookup(router, subjects[next])
		next++
	})
	if allocations > 1 {
		t.Errorf("a cache miss allocates %.1f times, want at most 1 (its key)", allocations)
	}
}

// TestCacheStopsStoringWhenItDoesNotPay: a connection cycling through far
// more subjects than the cache holds gets no hits from it, so once full
// the cache stops paying a key allocation per miss; a connection whose
// subjects fit keeps its hits, and a thrashing one tries again later.
func TestCacheStopsStoringWhenItDoesNotPay(t *testing.T) {
	router := subject.NewRouter(mustTable(t, subject.Binding{Pattern: "s.*", Stream: "s"}))
	subjects := make([][]byte, 40*subject.CacheEntries)
	for index := range subjects {
		subjects[index] = fmt.Appendf(nil, "s.%d", index)
	}
	var cycling subject.Cache
	for _, s := range subjects[:subject.CacheEntries+1] { // fill it, then one more miss
		cycling.Lookup(router, s)
	}
	next := subject.CacheEntries + 1
	allocations := testing.AllocsPerRun(1000, func() {
		if stream, ok := cycling.Lookup(router, subjects[next]); !ok || stream != "s" {
			t.Fatalf("Lookup(%s) = %q, %v", subjects[next], stream, ok)
		}
		next++
	})
	if allocations != 0 {
		t.Errorf("a thrashing cache still allocates %.2f times per miss", allocations)
	}
	var steady subject.Cache
	for range 4 {
		for _, s := range subjects[:subject.CacheEntries/2] {
			steady.Lookup(router, s)
		}
	}
	if steady.Len() != subject.CacheEntries/2 {
		t.Errorf("a cache whose subjects fit holds %d entries, want %d", steady.Len(), subject.CacheEntries/2)
	}
	if allocations := testing.AllocsPerRun(100, func() { steady.Lookup(router, subjects[3]) }); allocations != 0 {
		t.Errorf("a hit allocates %.2f times", allocations)
	}
	for _, s := range subjects { // the bypass ends: the cache fills again
		cycling.Lookup(router, s)
	}
	if cycling.Len() == 0 {
		t.Error("the cache never tried storing again after its bypass")
	}
}
