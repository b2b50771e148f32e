package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestRemotePath(t *testing.T) {
	tests := []struct {
		arg, id, path string
		remote        bool
	}{
		{"sbx_1:/work/a.txt", "sbx_1", "/work/a.txt", true},
		{"sbx_1:a.txt", "sbx_1", "a.txt", true},
		{"sbx_1:", "sbx_1", "", true},
		{"./odd:name", "", "", false},
		{"/abs/path", "", "", false},
		{"dir/file:x", "", "", false},
		{"plain.txt", "", "", false},
		{"-", "", "", false},
	}
	for _, tt := range tests {
		id, p, remote := remotePath(tt.arg)
		if id != tt.id || p != tt.path || remote != tt.remote {
			t.Errorf("remotePath(%q) = %q, %q, %v; want %q, %q, %v", tt.arg, id, p, remote, tt.id, tt.path, tt.remote)
		}
	}
}

func TestPairs(t *testing.T) {
	tests := []struct {
		in   []string
		want map[string]string
		err  bool
	}{
		{nil, nil, false},
		{[]string{"a=b", "c=d=e", "empty="}, map[string]string{"a": "b", "c": "d=e", "empty": ""}, false},
		{[]string{"novalue"}, nil, true},
		{[]string{"=v"}, nil, true},
	}
	for _, tt := range tests {
		got, err := pairs("--label", tt.in)
		if (err != nil) != tt.err {
			t.Errorf("pairs(%q): %v", tt.in, err)
			continue
		}
		if err != nil && !errors.As(err, new(usageError)) {
			t.Errorf("pairs(%q): %v is not a usage error", tt.in, err)
		}
		if len(got) != len(tt.want) {
			t.Errorf("pairs(%q) = %v, want %v", tt.in, got, tt.want)
		}
		for k, v := range tt.want {
			if got[k] != v {
				t.Errorf("pairs(%q)[%q] = %q, want %q", tt.in, k, got[k], v)
			}
		}
	}
}

func TestIsLocal(t *testing.T) {
	tests := map[string]bool{
		"http://127.0.0.1:8700":       true,
		"http://localhost:8700":       true,
		"https://[::1]:8700":          true,
		"http://127.0.0.2:8700/base":  true,
		"http://10.0.0.5:8700":        false,
		"https://differently.example": false,
		"ftp://127.0.0.1":             false,
		"not a url":                   false,
	}
	for endpoint, want := range tests {
		if got := isLocal(endpoint); got != want {
			t.Errorf("isLocal(%q) = %v, want %v", endpoint, got, want)
		}
	}
}

func TestShort(t *testing.T) {
	tests := map[time.Duration]string{
		0:                       "0s",
		59 * time.Second:        "59s",
		90 * time.Second:        "1m",
		3 * time.Hour:           "3h",
		47 * time.Hour:          "47h",
		72 * time.Hour:          "3d",
		-5 * time.Minute:        "-5m",
		1500 * time.Millisecond: "1s",
	}
	for d, want := range tests {
		if got := short(d); got != want {
			t.Errorf("short(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestOneLine(t *testing.T) {
	tests := map[string]string{
		"one":  "one",
		"a\nb": "a; b",
		"unknown command \"lst\" for \"differently\"\n\nDid you mean this?\n\tget\n\tls\n": `unknown command "lst" for "differently"; did you mean: get; ls`,
	}
	for in, want := range tests {
		if got := oneLine(in); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

// A live table's later rows line up with its first ones, and -o id writes IDs only.
func TestLiveTable(t *testing.T) {
	for _, output := range []string{"table", "id"} {
		var out bytes.Buffer
		a := &app{io: streams{out: &out, err: io.Discard}, getenv: func(string) string { return "" }, output: output}
		first := a.table("ID", "STATE", "POOL")
		first.rowc(cell{text: "sbx_1"}, cell{text: "running", colour: green}, cell{text: "fake"})
		first.id("sbx_1")
		live, err := a.startLive(first, map[int]int{1: len("provisioning")})
		if err != nil {
			t.Fatal(err)
		}
		more := a.table("ID", "STATE", "POOL")
		more.rowc(cell{text: "sbx_2"}, cell{text: "provisioning"}, cell{text: ""})
		more.id("sbx_2")
		if err := live.add(more); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if output == "id" {
			if strings.Join(lines, ",") != "sbx_1,sbx_2" {
				t.Errorf("-o id: %q", lines)
			}
			continue
		}
		if len(lines) != 3 {
			t.Fatalf("%q", lines)
		}
		for _, col := range []string{"STATE", "POOL"} {
			at := strings.Index(lines[0], col)
			if at < 0 || lines[1][at-1] != ' ' || lines[1][at] == ' ' || lines[2][at-1] != ' ' || lines[2][at] == ' ' {
				t.Errorf("column %s is not aligned:\n%s", col, out.String())
			}
		}
		if !strings.HasSuffix(lines[2], "-") {
			t.Errorf("an empty cell is not a dash: %q", lines[2])
		}
	}
}
