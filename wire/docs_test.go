package wire_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/wire"
)

// docs/WIRE.md is what client implementers in other languages read, so it
// must say exactly what the code does. These tests read its frame type
// table, its error code table and each frame section's body size, and
// compare them with wire.Types(), wire.Codes() and the encoders, in both
// directions: a frame or code added to the code but not the page, or left
// on the page after it left the code, fails by name.

const wireDocPath = "../docs/WIRE.md"

const (
	typeTableHeader = "| type | name | direction |"
	codeTableHeader = "| code | name | retryable | closes |"
)

func readWireDoc(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(wireDocPath)
	if err != nil {
		t.Fatalf("the protocol reference must exist: %v", err)
	}
	return string(doc)
}

// markdownTable returns the body rows, split into trimmed cells, of the one
// table whose header line is header (compared with whitespace collapsed).
// Exactly one such table must exist: two would leave the reader, and this
// test, unsure which is the truth.
func markdownTable(doc, header string) ([][]string, error) {
	lines := strings.Split(doc, "\n")
	var found []int
	for i, line := range lines {
		if strings.Join(strings.Fields(line), " ") == header {
			found = append(found, i)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("want exactly one table with header %q, found %d", header, len(found))
	}
	columns := len(splitRow(header))
	var rows [][]string
	for i := found[0] + 1; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := splitRow(line)
		if i == found[0]+1 {
			if !isSeparatorRow(cells) {
				return nil, fmt.Errorf("table %q: line %d should be the |---| separator, is %q", header, i+1, line)
			}
			continue
		}
		if len(cells) != columns {
			return nil, fmt.Errorf("table %q: line %d has %d cells, want %d: %q", header, i+1, len(cells), columns, line)
		}
		rows = append(rows, cells)
	}
	return rows, nil
}

func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	cells := strings.Split(line, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

func isSeparatorRow(cells []string) bool {
	for _, cell := range cells {
		if strings.Trim(cell, ":-") != "" || !strings.Contains(cell, "-") {
			return false
		}
	}
	return true
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// typeTableProblems compares the frame type table of doc with types and
// returns one message per disagreement.
func typeTableProblems(doc string, types []wire.TypeInfo) []string {
	rows, err := markdownTable(doc, typeTableHeader)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	documented := map[int][]string{}
	for _, row := range rows {
		number, err := strconv.Atoi(row[0])
		if err != nil || number < 0 || number > 255 {
			problems = append(problems, fmt.Sprintf("frame type table: %q is not a type number", row[0]))
			continue
		}
		if _, twice := documented[number]; twice {
			problems = append(problems, fmt.Sprintf("frame type table: type %d is listed twice", number))
		}
		documented[number] = row
	}
	inCode := map[int]bool{}
	for _, info := range types {
		number := int(info.Type)
		inCode[number] = true
		row, ok := documented[number]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("frame type %d (%s) is in wire.Types() but missing from the table in %s", number, info.Name, wireDocPath))
		case row[1] != info.Name || row[2] != info.Direction:
			problems = append(problems, fmt.Sprintf("frame type %d: %s says %s %s, the code says %s %s", number, wireDocPath, row[1], row[2], info.Name, info.Direction))
		}
	}
	for _, number := range sortedKeys(documented) {
		if !inCode[number] {
			problems = append(problems, fmt.Sprintf("frame type %d (%s) is in %s but not in wire.Types()", number, documented[number][1], wireDocPath))
		}
	}
	return problems
}

// codeTableProblems compares the error code table of doc with codes and
// returns one message per disagreement.
func codeTableProblems(doc string, codes []wire.CodeInfo) []string {
	rows, err := markdownTable(doc, codeTableHeader)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	documented := map[int][]string{}
	for _, row := range rows {
		number, err := strconv.Atoi(row[0])
		if err != nil || number < 0 || number > 65535 {
			problems = append(problems, fmt.Sprintf("error code table: %q is not a code number", row[0]))
			continue
		}
		for _, flag := range row[2:] {
			if flag != "yes" && flag != "no" {
				problems = append(problems, fmt.Sprintf("error code %d: %q should be yes or no", number, flag))
			}
		}
		if _, twice := documented[number]; twice {
			problems = append(problems, fmt.Sprintf("error code table: code %d is listed twice", number))
		}
		documented[number] = row
	}
	inCode := map[int]bool{}
	for _, info := range codes {
		number := int(info.Code)
		inCode[number] = true
		row, ok := documented[number]
		want := []string{strconv.Itoa(number), info.Name, yesNo(info.Retryable), yesNo(info.Closes)}
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("error code %d (%s) is in wire.Codes() but missing from the table in %s", number, info.Name, wireDocPath))
		case !slices.Equal(row, want):
			problems = append(problems, fmt.Sprintf("error code %d: %s says %q, the code says %q", number, wireDocPath, row, want))
		}
	}
	for _, number := range sortedKeys(documented) {
		if !inCode[number] {
			problems = append(problems, fmt.Sprintf("error code %d (%s) is in %s but not in wire.Codes()", number, documented[number][1], wireDocPath))
		}
	}
	return problems
}

func sortedKeys(m map[int][]string) []int {
	keys := make([]int, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	return keys
}

func TestWireDocMatchesCode(t *testing.T) {
	doc := readWireDoc(t)
	for _, problem := range typeTableProblems(doc, wire.Types()) {
		t.Error(problem)
	}
	for _, problem := range codeTableProblems(doc, wire.Codes()) {
		t.Error(problem)
	}
}

// TestWireDocDriftIsCaught checks the checker: a table that lost a row,
// gained one, or changed a cell must fail with a message naming the row.
// Without it, a parser that silently read nothing would pass forever.
func TestWireDocDriftIsCaught(t *testing.T) {
	doc := readWireDoc(t)
	cases := []struct {
		name, old, new, want string
		problems             func(string) []string
	}{
		{"type row missing", "| 6 | ProduceAck | S→C |\n", "", "frame type 6 (ProduceAck) is in wire.Types() but missing",
			func(d string) []string { return typeTableProblems(d, wire.Types()) }},
		{"type row extra", "| 13 | Error | S→C |\n", "| 13 | Error | S→C |\n| 200 | Fetch | C→S |\n", "frame type 200 (Fetch) is in ../docs/WIRE.md but not in wire.Types()",
			func(d string) []string { return typeTableProblems(d, wire.Types()) }},
		{"type direction wrong", "| 3 | Ping | both |", "| 3 | Ping | C→S |", "frame type 3",
			func(d string) []string { return typeTableProblems(d, wire.Types()) }},
		{"code row missing", "| 11 | busy | yes | no |\n", "", "error code 11 (busy) is in wire.Codes() but missing",
			func(d string) []string { return codeTableProblems(d, wire.Codes()) }},
		{"code row extra", "| 23 | quota_exceeded | yes | no |\n", "| 23 | quota_exceeded | yes | no |\n| 99 | quota | yes | no |\n", "error code 99 (quota) is in ../docs/WIRE.md but not in wire.Codes()",
			func(d string) []string { return codeTableProblems(d, wire.Codes()) }},
		{"code flag wrong", "| 10 | no_space | yes | no |", "| 10 | no_space | no | no |", "error code 10",
			func(d string) []string { return codeTableProblems(d, wire.Codes()) }},
		{"code table twice", "| code | name | retryable | closes |", "| code | name | retryable | closes |\n|---|---|---|---|\n\n| code | name | retryable | closes |", "exactly one table",
			func(d string) []string { return codeTableProblems(d, wire.Codes()) }},
	}
	for _, tc := range cases {
		if !strings.Contains(doc, tc.old) {
			t.Fatalf("%s: the doc no longer contains %q; update this test", tc.name, tc.old)
		}
		problems := tc.problems(strings.Replace(doc, tc.old, tc.new, 1))
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
			t.Errorf("%s: want a problem containing %q, got %q", tc.name, tc.want, problems)
		}
	}
}

// TestWireDocBodySizes checks the "Body size: N bytes" line of each frame
// section ("### <type> <Name>") against the encoding of the message with
// every variable field empty, so a field added to an encoder without its
// row in the page fails here.
func TestWireDocBodySizes(t *testing.T) {
	doc := readWireDoc(t)
	empty := map[wire.Type]wire.Message{
		wire.TypeHello: &wire.Hello{}, wire.TypeWelcome: &wire.Welcome{}, wire.TypePing: &wire.Ping{}, wire.TypePong: &wire.Pong{},
		wire.TypeProduce: &wire.Produce{}, wire.TypeProduceAck: &wire.ProduceAck{}, wire.TypeConsume: &wire.Consume{},
		wire.TypeDeliver: &wire.Deliver{}, wire.TypeConsumeEnd: &wire.ConsumeEnd{}, wire.TypeAck: &wire.Ack{},
		wire.TypeAckResult: &wire.AckResult{}, wire.TypeGap: &wire.Gap{}, wire.TypeError: &wire.Error{},
		wire.TypeOpenGroup: &wire.OpenGroup{}, wire.TypeGroupInfo: &wire.GroupInfo{}, wire.TypeDeliverBatch: &wire.DeliverBatch{},
		wire.TypeGroupAdmin: &wire.GroupAdmin{}, wire.TypeGroupList: &wire.GroupList{}, wire.TypeDeadLetterAdmin: &wire.DeadLetterAdmin{},
		wire.TypeDeadLetterState: &wire.DeadLetterState{}, wire.TypeStreamAdmin: &wire.StreamAdmin{}, wire.TypeStreamList: &wire.StreamList{},
		wire.TypeProducerInit: &wire.ProducerInit{}, wire.TypeProducerInfo: &wire.ProducerInfo{},
		wire.TypeTxnBegin: &wire.TxnBegin{}, wire.TypeTxnEnd: &wire.TxnEnd{}, wire.TypeTxnState: &wire.TxnState{},
		wire.TypeStreamCompacted: &wire.StreamCompacted{},
		wire.TypeClusterInfo:     &wire.ClusterInfo{}, wire.TypeClusterState: &wire.ClusterState{},
		wire.TypeLeaderTransfer: &wire.LeaderTransfer{}, wire.TypeLeaderTransferred: &wire.LeaderTransferred{},
	}
	bodySize := regexp.MustCompile(`(?m)^Body size: (\d+) bytes`)
	for _, info := range wire.Types() {
		heading := fmt.Sprintf("\n### %d %s\n", info.Type, info.Name)
		at := strings.Index(doc, heading)
		if at < 0 {
			t.Errorf("%s has no section %q", wireDocPath, strings.TrimSpace(heading))
			continue
		}
		section := doc[at+len(heading):]
		if next := strings.Index(section, "\n#"); next >= 0 {
			section = section[:next]
		}
		match := bodySize.FindStringSubmatch(section)
		if match == nil {
			t.Errorf("section %q has no \"Body size: N bytes\" line", strings.TrimSpace(heading))
			continue
		}
		message, ok := empty[info.Type]
		if !ok {
			t.Errorf("frame type %v has no empty message in this test; add one", info.Type)
			continue
		}
		if want := len(message.AppendBody(nil)); match[1] != strconv.Itoa(want) {
			t.Errorf("section %q says the body is %s bytes plus its variable fields; the encoder writes %d", strings.TrimSpace(heading), match[1], want)
		}
	}
}
