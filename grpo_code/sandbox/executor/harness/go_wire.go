// grpo-code's Go harness, shared by script and call tests (docs/languages.md): the payload
// on fd 4 (the nonce, then one JSON object), the report on fd 3, and values as JSON.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

var grpoReportFile = os.NewFile(3, "report")

func grpoPayload() (string, map[string]json.RawMessage) {
	f := os.NewFile(4, "payload")
	data, _ := io.ReadAll(f)
	f.Close()
	text := string(data)
	cut := strings.IndexByte(text, '\n')
	what := map[string]json.RawMessage{}
	if cut < 0 {
		return text, what
	}
	json.Unmarshal([]byte(text[cut+1:]), &what)
	return text[:cut], what
}

func grpoReport(nonce, event, fields string) {
	quoted, _ := json.Marshal(nonce)
	line := `{"nonce":` + string(quoted) + `, "event": "` + event + `"` + fields + "}\n"
	grpoReportFile.Write([]byte(line))
}

func grpoMessage(text string) string {
	quoted, _ := json.Marshal(text)
	return `, "message": ` + string(quoted)
}

// grpoPlain turns the sandbox's tagged values ({"$t": [...]} a tuple, {"$d": [[k, v]...]}
// a dict...) into what encoding/json decodes into Go types: arrays and objects.
func grpoPlain(v interface{}) interface{} {
	switch x := v.(type) {
	case []interface{}:
		for i := range x {
			x[i] = grpoPlain(x[i])
		}
		return x
	case map[string]interface{}:
		if len(x) == 1 {
			for tag, body := range x {
				switch tag {
				case "$t", "$s", "$f":
					return grpoPlain(body)
				case "$d":
					out := map[string]interface{}{}
					pairs, _ := body.([]interface{})
					for _, p := range pairs {
						kv, _ := p.([]interface{})
						if len(kv) == 2 {
							out[fmt.Sprint(kv[0])] = grpoPlain(kv[1])
						}
					}
					return out
				}
			}
		}
		for k := range x {
			x[k] = grpoPlain(x[k])
		}
		return x
	}
	return v
}

func grpoDecode(raw json.RawMessage, t reflect.Type) (reflect.Value, error) {
	var tree interface{}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return reflect.Value{}, err
	}
	plain, _ := json.Marshal(grpoPlain(tree))
	out := reflect.New(t)
	if err := json.Unmarshal(plain, out.Interface()); err != nil {
		return reflect.Value{}, err
	}
	return out.Elem(), nil
}

func grpoFloat(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	text := strconv.FormatFloat(f, 'g', -1, bits)
	if !strings.ContainsAny(text, ".eEn") {
		text += ".0"
	}
	return text
}

// grpoEncode writes a returned value as plain data; a value that is not (a struct, a
// function, a channel) is refused.
func grpoEncode(v reflect.Value, b *strings.Builder) error {
	switch v.Kind() {
	case reflect.Invalid:
		b.WriteString("null")
	case reflect.Bool:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32:
		b.WriteString(grpoFloat(v.Float(), 32))
	case reflect.Float64:
		b.WriteString(grpoFloat(v.Float(), 64))
	case reflect.String:
		quoted, _ := json.Marshal(v.String())
		b.Write(quoted)
	case reflect.Slice, reflect.Array:
		b.WriteByte('[')
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := grpoEncode(v.Index(i), b); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		text := v.Type().Key().Kind() == reflect.String
		if text {
			b.WriteByte('{')
		} else {
			b.WriteString(`{"$d": [`)
		}
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			if !text {
				b.WriteByte('[')
			}
			if err := grpoEncode(k, b); err != nil {
				return err
			}
			if text {
				b.WriteString(": ")
			} else {
				b.WriteString(", ")
			}
			if err := grpoEncode(v.MapIndex(k), b); err != nil {
				return err
			}
			if !text {
				b.WriteByte(']')
			}
		}
		if text {
			b.WriteByte('}')
		} else {
			b.WriteString("]}")
		}
	case reflect.Ptr, reflect.Interface:
		if v.IsNil() {
			b.WriteString("null")
			return nil
		}
		return grpoEncode(v.Elem(), b)
	default:
		return fmt.Errorf("the function returned a %s, which is not plain data", v.Type())
	}
	return nil
}
