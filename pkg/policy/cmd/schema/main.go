// Command schema writes the JSON Schema of .github/prloop.yml
// (policy.Schema) to the file -o names: go generate ./pkg/policy.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/prloop/prloop/pkg/policy"
)

func main() {
	out := flag.String("o", "prloop.schema.json", "file to write")
	flag.Parse()
	b, err := policy.Schema()
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "schema:", err)
		os.Exit(1)
	}
}
