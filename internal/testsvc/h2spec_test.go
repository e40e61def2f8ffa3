package testsvc

import (
	"strings"
	"testing"
)

// A report in h2spec's JUnit form: a passed case, a failed one (an
// <error>, as h2spec writes failures) and a skipped one, numbered by their
// place in the section.
const sampleH2specReport = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="4.2. Frame Size" package="http2/4.2" id="4.2" tests="3" skipped="1" failures="0" errors="1">
    <testcase package="http2/4.2" classname="Sends a DATA frame with 2^14 octets in length" time="0.0009"></testcase>
    <testcase package="http2/4.2" classname="Sends a large size DATA frame" time="0.0009"><skipped>not supported</skipped></testcase>
    <testcase package="http2/4.2" classname="Sends a large size HEADERS frame" time="2.0039">
      <error>GOAWAY Frame (Error Code: FRAME_SIZE_ERROR)
DATA Frame (length:536, flags:0x01, stream_id:1)</error>
    </testcase>
  </testsuite>
</testsuites>`

func TestParseH2specReport(t *testing.T) {
	rep, err := ParseH2specReport(strings.NewReader(sampleH2specReport))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total != 3 || rep.Passed != 1 || len(rep.Skipped) != 1 || len(rep.Failed) != 1 {
		t.Fatalf("report %+v, want 3 cases: 1 passed, 1 skipped, 1 failed", rep)
	}
	f := rep.Failed[0]
	if f.ID() != "http2/4.2/3" || f.Name != "Sends a large size HEADERS frame" || !strings.Contains(f.Failure, "length:536") {
		t.Errorf("failed case %+v (%s)", f, f.ID())
	}
	if _, err := ParseH2specReport(strings.NewReader("<testsuites></testsuites>")); err == nil {
		t.Error("a report without cases parsed")
	}
	if _, err := ParseH2specReport(strings.NewReader("not xml")); err == nil {
		t.Error("a report that is not XML parsed")
	}
}
