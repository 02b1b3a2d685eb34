// Reads {"patterns": [...], "probes": [...]} on stdin and prints, for each pattern, whether Go's regexp (RE2)
// finds it in each probe: JSON Schema's `pattern` is a search, as MatchString is. Used by input-schema.test.ts.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
)

func main() {
	var d struct{ Patterns, Probes []string }
	if err := json.NewDecoder(os.Stdin).Decode(&d); err != nil {
		panic(err)
	}
	out := [][]bool{}
	for _, p := range d.Patterns {
		re := regexp.MustCompile(p)
		row := []bool{}
		for _, s := range d.Probes {
			row = append(row, re.MatchString(s))
		}
		out = append(out, row)
	}
	j, _ := json.Marshal(out)
	fmt.Println(string(j))
}
