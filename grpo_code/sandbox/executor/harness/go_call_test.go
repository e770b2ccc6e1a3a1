// grpo-code's Go call harness: decodes the test's arguments into the parameter types of the
// function the test names, calls it and reports the returned value as data (results
// after the first make a list). The expected value never enters this process.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	nonce, what := grpoPayload()
	var name string
	var args []json.RawMessage
	json.Unmarshal(what["fn"], &name)
	json.Unmarshal(what["args"], &args)
	fn := reflect.ValueOf(grpoFunctions[name])
	if fn.Kind() != reflect.Func || fn.Type().NumIn() != len(args) {
		grpoReport(nonce, "runtime_error", grpoMessage(fmt.Sprintf("%s does not take %d arguments", name, len(args))))
		os.Exit(1)
	}
	in := make([]reflect.Value, len(args))
	for i, raw := range args {
		value, err := grpoDecode(raw, fn.Type().In(i))
		if err != nil {
			grpoReport(nonce, "runtime_error", grpoMessage(fmt.Sprintf("argument %d of %s: %v", i+1, name, err)))
			os.Exit(1)
		}
		in[i] = value
	}
	defer func() {
		if r := recover(); r != nil {
			grpoReport(nonce, "runtime_error", grpoMessage(fmt.Sprintf("panic: %v", r)))
			os.Exit(2)
		}
	}()
	out := fn.Call(in)
	var b strings.Builder
	var err error
	if len(out) == 1 {
		err = grpoEncode(out[0], &b)
	} else {
		values := make([]interface{}, len(out))
		for i := range out {
			values[i] = out[i].Interface()
		}
		err = grpoEncode(reflect.ValueOf(values), &b)
	}
	if err != nil {
		grpoReport(nonce, "not_plain", grpoMessage(err.Error()))
		os.Exit(0)
	}
	grpoReport(nonce, "returned", `, "value": `+b.String())
	os.Exit(0)
}
