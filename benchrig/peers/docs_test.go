package main

import (
	"strings"
	"testing"
)

func TestReplaceBlock(t *testing.T) {
	document := "# Title\n\nbefore\n" + docsBeginMarker + " (generated) -->\nold table\n" + docsEndMarker + "\nafter\n"
	updated, err := replaceBlock([]byte(document), "new table\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# Title\n\nbefore\n" + docsBeginMarker + " (generated) -->\nnew table\n" + docsEndMarker + "\nafter\n"
	if string(updated) != want {
		t.Fatalf("got\n%s\nwant\n%s", updated, want)
	}
	// Replacing again gives the same document: the block is all that changes.
	again, err := replaceBlock(updated, "new table\n")
	if err != nil || string(again) != want {
		t.Fatalf("second replace changed the document: %q, %v", again, err)
	}
}

func TestReplaceBlockRefusesBrokenMarkers(t *testing.T) {
	for name, document := range map[string]string{
		"no begin":         "text\n" + docsEndMarker + "\n",
		"begin at the end": "text\n" + docsBeginMarker,
		"no end":           docsBeginMarker + " -->\ntable\n",
		"end before begin": docsEndMarker + "\n" + docsBeginMarker + " -->\ntable\n",
	} {
		if _, err := replaceBlock([]byte(document), "x\n"); err == nil {
			t.Errorf("%s: replaced a block", name)
		}
	}
}

func TestMarkdownNamesEveryRow(t *testing.T) {
	meets := false
	rep := report{Rows: []Row{{Row: "P2a", Title: "8 producers, 1 in flight each", PayloadBytes: 1024, IronBus: 19426,
		IronBusLabel: labelIronBus, Peer: 4050, PeerLabel: labelJetStreamAlways, Ratio: 4.8, Unit: "msg/s",
		MinMax: map[string][2]float64{"ironbus": {18000, 20000}, "peer": {4000, 4100}}, Runs: 3,
		Target: "≥ 5×", Meets: &meets}}}
	block := markdown(rep)
	for _, want := range []string{"| P2a |", "19,426 msg/s", "4.80×", "MISS"} {
		if !strings.Contains(block, want) {
			t.Errorf("the block lacks %q:\n%s", want, block)
		}
	}
}
