package health

import (
	"compress/gzip"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/encoding/protodelim"
)

// The /metrics exposition. It offers the two formats a Prometheus server
// asks for: the delimited protobuf (requested first when native histograms
// are on) and the text format every scraper reads, which is also the
// answer to any other Accept. It writes them with expfmt rather than
// through promhttp: promhttp's package links its instrumentation's 32
// response-writer wrapper types and its encoder links the OpenMetrics
// writers (the broker never offered OpenMetrics) and the protobuf
// text/compact-text debug formats, 0.28 MB of the binary between them
// (docs/PACKAGING.md).
//
// The rest follows promhttp's handler as the broker configured it
// (ContinueOnError): a collector that fails is left out and the others
// are served, and only a scrape that gathered nothing answers 500; the
// answer is gzipped when the scraper prefers gzip; name[] parameters
// keep only the families they name.

// writeMetrics answers one scrape of gatherer.
func writeMetrics(w http.ResponseWriter, r *http.Request, gatherer prometheus.Gatherer) {
	families, err := gatherer.Gather()
	if err != nil && len(families) == 0 {
		writeText(w, http.StatusInternalServerError, "gathering metrics: "+err.Error())
		return
	}
	format := expfmt.NegotiateAccept(r.Header, expfmt.FmtProtoDelim, expfmt.FmtText)
	header := w.Header()
	header.Add("Vary", "Accept")
	header.Add("Vary", "Accept-Encoding")
	header.Set("Content-Type", string(format))
	var out io.Writer = w
	if prefersGzip(r.Header.Values("Accept-Encoding")) {
		header.Set("Content-Encoding", "gzip")
		zipped := gzip.NewWriter(w)
		defer zipped.Close()
		out = zipped
	}
	var only map[string]bool
	if r.URL != nil {
		for _, name := range r.URL.Query()["name[]"] {
			if only == nil {
				only = map[string]bool{}
			}
			only[name] = true
		}
	}
	escaping := format.ToEscapingScheme()
	delimited := format.FormatType() == expfmt.TypeProtoDelim
	for _, family := range families {
		if only != nil && !only[family.GetName()] {
			continue
		}
		family = model.EscapeMetricFamily(family, escaping)
		var err error
		if delimited {
			_, err = protodelim.MarshalTo(out, family)
		} else {
			_, err = expfmt.MetricFamilyToText(out, family)
		}
		if err != nil {
			// The status and part of the answer are sent; a scraper
			// that went away is not worth the rest.
			return
		}
	}
}

// prefersGzip reports whether an Accept-Encoding header (all its lines)
// ranks gzip above the identity encoding: the highest quality naming gzip
// (or *) must be positive and above the highest naming identity (or *).
// An element that does not parse is skipped.
func prefersGzip(lines []string) bool {
	bestGzip, bestIdentity := -1.0, -1.0
	for _, line := range lines {
		for _, element := range strings.Split(line, ",") {
			coding, quality, ok := parseCoding(element)
			if !ok {
				continue
			}
			if coding == "gzip" || coding == "*" {
				bestGzip = max(bestGzip, quality)
			}
			if coding == "identity" || coding == "*" {
				bestIdentity = max(bestIdentity, quality)
			}
		}
	}
	return bestGzip > 0 && bestGzip > bestIdentity
}

// parseCoding parses one Accept-Encoding element: a coding with an
// optional ";q=" quality from 0 to 1.
func parseCoding(element string) (coding string, quality float64, ok bool) {
	coding, parameter, hasParameter := strings.Cut(element, ";")
	coding = strings.TrimSpace(coding)
	if coding == "" {
		return "", 0, false
	}
	if !hasParameter {
		return coding, 1, true
	}
	value, isQuality := strings.CutPrefix(strings.TrimSpace(parameter), "q=")
	if !isQuality {
		return "", 0, false
	}
	quality, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
	if err != nil || quality < 0 || quality > 1 {
		return "", 0, false
	}
	return coding, quality, true
}
