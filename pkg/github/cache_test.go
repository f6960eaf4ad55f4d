package github

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestArrayLen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want int
	}{
		{name: "empty", in: `[]`, want: 0},
		{name: "empty with spaces", in: " [ \n ] ", want: 0},
		{name: "numbers", in: `[1, 2, 3]`, want: 3},
		{name: "one object", in: `[{"a":[1,2],"b":{"c":","}}]`, want: 1},
		{name: "escaped quotes", in: `["a\",b", "c\\", "d"]`, want: 3},
		{name: "nested arrays", in: `[[1,2],[3],[]]`, want: 3},
		{name: "object", in: `{"a":[1,2]}`, want: -1},
		{name: "nothing", in: ``, want: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, arrayLen([]byte(tt.in)))
		})
	}
}
