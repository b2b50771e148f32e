package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// parse checks the document against Config's shape before decoding it. The decoder
// alone stops at the first unknown key, reports type errors in Go terms ("Go struct
// field C.Pools of type int") and quietly turns 3.5 into 3 or "yes" into a string; the
// walk below reports every unknown key and wrong type at once, by line and key path.
func parse(name string, data []byte) (*Config, error) {
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, yamlError(name, err)
	}
	if len(file.Docs) > 1 {
		// The decoder would read the first document and drop the rest without a word.
		line := 0
		if tk := file.Docs[1].GetToken(); tk != nil {
			line = tk.Position.Line
		}
		return nil, fmt.Errorf("%s: a config file holds one YAML document; remove the second", where(name, line))
	}
	cfg := Default()
	if len(file.Docs) == 0 || file.Docs[0].Body == nil {
		// The decoder would zero the defaults for an empty document.
		return cfg, nil
	}
	c := checker{name: name}
	c.check(file.Docs[0].Body, reflect.TypeFor[Config](), "")
	if len(c.problems) > 0 {
		return nil, errors.Join(c.problems...)
	}
	// Strict stays on as a second line of defence for shapes the walk skips (aliases).
	if err := yaml.UnmarshalWithOptions(data, cfg, yaml.Strict()); err != nil {
		return nil, yamlError(name, err)
	}
	return cfg, nil
}

// where prefixes a message with the file and line an operator should look at.
func where(name string, line int) string {
	if name == "" {
		return fmt.Sprintf("line %d", line)
	}
	return fmt.Sprintf("%s:%d", name, line)
}

// yamlError rewrites a go-yaml error as "file:line: message", without the source
// excerpt its default formatting adds.
func yamlError(name string, err error) error {
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		return fmt.Errorf("%s: %s", where(name, ye.GetToken().Position.Line), ye.GetMessage())
	}
	if name == "" {
		return fmt.Errorf("config: %w", err)
	}
	return fmt.Errorf("%s: %w", name, err)
}

type checker struct {
	name     string
	problems []error
}

func (c *checker) addf(n ast.Node, format string, args ...any) {
	line := 0
	if tk := n.GetToken(); tk != nil {
		line = tk.Position.Line
	}
	c.problems = append(c.problems, fmt.Errorf("%s: %s", where(c.name, line), fmt.Sprintf(format, args...)))
}

// check compares node n with the Go type t it will be decoded into; path is the key
// path so far ("pools[0].costModel").
func (c *checker) check(n ast.Node, t reflect.Type, path string) {
	switch v := n.(type) {
	case *ast.AnchorNode:
		c.check(v.Value, t, path)
		return
	case *ast.TagNode:
		c.check(v.Value, t, path)
		return
	case *ast.AliasNode:
		// Checked where its anchor is.
		return
	case *ast.NullNode:
		// A key with no value zeroes what it would set. For a text, a list or a mapping
		// that is the empty value anyone expects; for a number or a section it would
		// silently replace a default (maxAttempts 3) with 0.
		switch t.Kind() {
		case reflect.Struct, reflect.Int, reflect.Float64, reflect.Bool:
			c.addf(n, "%s: has no value; remove the key to keep the default", display(path))
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		c.checkStruct(n, t, path)
	case reflect.Slice:
		seq, ok := n.(*ast.SequenceNode)
		if !ok {
			c.addf(n, "%s: want a list, got %s", display(path), describe(n))
			return
		}
		for i, item := range seq.Values {
			c.check(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		if mappingValues(n) == nil {
			c.addf(n, "%s: want a mapping, got %s", display(path), describe(n))
		}
	case reflect.String:
		switch n.(type) {
		case *ast.StringNode, *ast.LiteralNode:
		default:
			// Strict on purpose: an unquoted no, 1.10 or 0755 is not the string it looks like.
			c.addf(n, "%s: want a string, got %s (quote it if it is meant as text)", display(path), describe(n))
		}
	case reflect.Int:
		if _, ok := n.(*ast.IntegerNode); !ok {
			c.addf(n, "%s: want an integer, got %s", display(path), describe(n))
		}
	case reflect.Float64:
		switch n.(type) {
		case *ast.IntegerNode, *ast.FloatNode:
		default:
			c.addf(n, "%s: want a number, got %s", display(path), describe(n))
		}
	case reflect.Bool:
		if _, ok := n.(*ast.BoolNode); !ok {
			c.addf(n, "%s: want true or false, got %s", display(path), describe(n))
		}
	}
}

func (c *checker) checkStruct(n ast.Node, t reflect.Type, path string) {
	values := mappingValues(n)
	if values == nil {
		c.addf(n, "%s: want a mapping, got %s", display(path), describe(n))
		return
	}
	fields := yamlFields(t)
	for _, mv := range values {
		if mv.Key == nil || mv.Key.IsMergeKey() {
			continue
		}
		key := keyName(mv.Key)
		field, ok := fields[key]
		if !ok {
			msg := fmt.Sprintf("unknown key %q %s", key, inPath(path))
			if s := suggest(key, fields); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			c.addf(mv.Key, "%s", msg)
			continue
		}
		sub := key
		if path != "" {
			sub = path + "." + key
		}
		c.check(mv.Value, field.Type, sub)
	}
}

// mappingValues returns a mapping's entries, or nil when n is not a mapping. An empty
// flow mapping ({}) gives an empty, non-nil slice.
func mappingValues(n ast.Node) []*ast.MappingValueNode {
	switch v := n.(type) {
	case *ast.MappingNode:
		if v.Values == nil {
			return []*ast.MappingValueNode{}
		}
		return v.Values
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{v}
	}
	return nil
}

func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := make(map[string]reflect.StructField, t.NumField())
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			out[name] = f
		}
	}
	return out
}

func keyName(k ast.MapKeyNode) string {
	if s, ok := k.(ast.ScalarNode); ok {
		return fmt.Sprint(s.GetValue())
	}
	return k.String()
}

func display(path string) string {
	if path == "" {
		return "top level"
	}
	return path
}

func inPath(path string) string {
	if path == "" {
		return "at top level"
	}
	return "in " + path
}

// describe names what the operator wrote, for "want X, got Y".
func describe(n ast.Node) string {
	switch v := n.(type) {
	case *ast.SequenceNode:
		return "a list"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.IntegerNode:
		return "integer " + v.GetToken().Value
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "number " + v.GetToken().Value
	case *ast.BoolNode:
		return "boolean " + v.GetToken().Value
	case *ast.StringNode:
		return fmt.Sprintf("string %q", v.Value)
	case *ast.LiteralNode:
		return "a text block"
	}
	return n.Type().String()
}

// suggest returns the known key closest to a misspelt one, if any is close enough to
// be the obvious intent.
func suggest(key string, fields map[string]reflect.StructField) string {
	best, bestDist := "", 3
	for name := range fields {
		if strings.EqualFold(name, key) {
			return name
		}
		if d := distance(strings.ToLower(key), strings.ToLower(name)); d < bestDist || (d == bestDist && name < best) {
			best, bestDist = name, d
		}
	}
	return best
}

// distance is the Levenshtein distance.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
