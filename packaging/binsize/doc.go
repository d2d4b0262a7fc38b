// Command binsize reports what a built ironbus binary is made of, for
// `make size`: its size in bytes against a budget, the size of each
// section, and the code of each package, summed from the function table
// (.gopclntab) that even a stripped Go binary keeps. It exits 1 when the
// binary is over the budget.
//
// Code sizes are the functions' machine code only: a package also costs
// its share of the function table (about three quarters of its code
// again), its type descriptors, strings and data, which the stripped
// binary does not attribute. docs/PACKAGING.md has the measured cost of
// each dependency, built with and without it.
package main
