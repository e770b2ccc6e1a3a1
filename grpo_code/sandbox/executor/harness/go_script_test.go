// grpo-code's Go script harness: runs the Test functions of one script test (go test's
// -test.run) and reports completion when they all passed.
package main

import (
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	nonce, what := grpoPayload()
	var index int
	json.Unmarshal(what["test"], &index)
	flag.Set("test.run", "^("+strings.Join(grpoTests[index], "|")+")$")
	code := m.Run()
	if code == 0 {
		grpoReport(nonce, "completed", "")
	} else {
		grpoReport(nonce, "assertion", grpoMessage("a Go test failed (its output is on stdout)"))
	}
	os.Exit(code)
}
