// Package profiling writes the CPU and heap profiles of one run of a
// process into a directory: cpu.pprof covers the run from Start to Stop,
// heap.pprof is the heap as Stop finds it.
//
// Invariants: at most one CPU profile runs in a process (the runtime's
// rule), so a second Start before Stop is refused with ErrBusy and leaves
// the first running; Stop always ends the CPU profile and closes its file,
// whether or not the heap profile can be written.
package profiling
