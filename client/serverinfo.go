package client

import "github.com/ironbus/ironbus/record"

// LargestPayload is the largest payload the server could take in one
// record: its record limit, or failing that its frame limit, or the
// default record limit when it announces neither. A record's key and
// headers take their share of it; Send checks each record's exact size.
func (info ServerInfo) LargestPayload() int {
	limit := int(info.MaxFrame)
	if info.MaxRecordBytes > 0 && info.MaxRecordBytes < limit {
		limit = info.MaxRecordBytes
	}
	if limit <= 0 {
		return record.DefaultMaxBody
	}
	return limit
}
