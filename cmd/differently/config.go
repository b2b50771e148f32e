package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"

	"github.com/different-ai/differently/server/defaults"
)

// config is the file of named contexts, differently/config.yaml in the user config
// folder:
//
//	current-context: prod
//	contexts:
//	  prod:
//	    endpoint: https://differently.example.com
//	    token-file: /run/secrets/differently
//	  dev:
//	    endpoint: http://127.0.0.1:8700
//	    token: ...
type config struct {
	CurrentContext string                   `yaml:"current-context,omitempty"`
	Contexts       map[string]contextConfig `yaml:"contexts,omitempty"`
}

type contextConfig struct {
	Endpoint  string `yaml:"endpoint,omitempty"`
	Token     string `yaml:"token,omitempty"`
	TokenFile string `yaml:"token-file,omitempty"`
}

// connection is where the commands go and with what, and where each came from, for
// `differently context show` and for the hints of errors. The token is never printed.
type connection struct {
	endpoint, endpointFrom string
	token, tokenFrom       string
}

func (a *app) configFile() (string, error) {
	if a.configPath != "" {
		return a.configPath, nil
	}
	if p := a.getenv("DIFFERENTLY_CONFIG"); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no config folder (%v): pass --config", err)
	}
	return filepath.Join(dir, "differently", "config.yaml"), nil
}

// loadConfig reads the config file; a missing one is an empty config.
func (a *app) loadConfig() (*config, string, error) {
	path, err := a.configFile()
	if err != nil {
		return nil, "", err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &config{}, path, nil
	}
	if err != nil {
		return nil, path, err
	}
	var cfg config
	if err := yaml.UnmarshalWithOptions(data, &cfg, yaml.Strict()); err != nil {
		return nil, path, fmt.Errorf("config %s: %s", path, yaml.FormatError(err, false, false))
	}
	return &cfg, path, nil
}

// saveConfig writes the file readable by its owner only, since it may hold tokens.
func saveConfig(path string, cfg *config) error {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// resolve settles the endpoint and the token, each on its own, in this order: the
// flag, the environment, the chosen context, and for a daemon on this machine the
// admin token a development daemon wrote to its data folder. That last one is never
// sent anywhere else.
func (a *app) resolve() (*connection, error) {
	cfg, path, err := a.loadConfig()
	if err != nil {
		return nil, err
	}
	name, nameFrom := a.contextName, "--context"
	if name == "" {
		name, nameFrom = a.getenv("DIFFERENTLY_CONTEXT"), "DIFFERENTLY_CONTEXT"
	}
	if name == "" {
		name, nameFrom = cfg.CurrentContext, "current-context in "+path
	}
	var ctxCfg contextConfig
	if name != "" {
		c, ok := cfg.Contexts[name]
		if !ok {
			return nil, usagef("context %q (from %s) is not in %s; `differently context ls` lists them", name, nameFrom, path)
		}
		ctxCfg = c
	}

	conn := &connection{}
	switch {
	case a.endpoint != "":
		conn.endpoint, conn.endpointFrom = a.endpoint, "--endpoint"
	case a.getenv("DIFFERENTLY_ENDPOINT") != "":
		conn.endpoint, conn.endpointFrom = a.getenv("DIFFERENTLY_ENDPOINT"), "DIFFERENTLY_ENDPOINT"
	case ctxCfg.Endpoint != "":
		conn.endpoint, conn.endpointFrom = ctxCfg.Endpoint, "context "+name
	default:
		conn.endpoint, conn.endpointFrom = defaults.URL, "default"
	}
	conn.endpoint = strings.TrimRight(conn.endpoint, "/")

	switch {
	case a.token != "":
		conn.token, conn.tokenFrom = a.token, "--token"
	case a.tokenFile != "":
		tok, err := readToken(a.tokenFile)
		if err != nil {
			return nil, usagef("--token-file: %v", err)
		}
		conn.token, conn.tokenFrom = tok, "--token-file "+a.tokenFile
	case a.getenv("DIFFERENTLY_TOKEN") != "":
		conn.token, conn.tokenFrom = a.getenv("DIFFERENTLY_TOKEN"), "DIFFERENTLY_TOKEN"
	case ctxCfg.Token != "":
		conn.token, conn.tokenFrom = ctxCfg.Token, "context "+name
	case ctxCfg.TokenFile != "":
		tok, err := readToken(ctxCfg.TokenFile)
		if err != nil {
			return nil, usagef("context %s: token-file: %v", name, err)
		}
		conn.token, conn.tokenFrom = tok, "context "+name+" (token-file "+ctxCfg.TokenFile+")"
	case isLocal(conn.endpoint):
		if dir, err := defaults.DataDir(a.getenv); err == nil {
			file := filepath.Join(dir, defaults.AdminTokenFile)
			if tok, err := readToken(file); err == nil {
				conn.token, conn.tokenFrom = tok, "development daemon's "+file
			}
		}
	}
	return conn, nil
}

// readToken reads a token file, dropping the newline at its end.
func readToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return tok, nil
}

// isLocal reports whether endpoint is a daemon on this machine's loopback, the only
// place a development admin token is sent without being asked.
func isLocal(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (a *app) contextCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "context",
		Short: "Named daemons and tokens in the config file",
		Long: `A context names a daemon and a token, kept in the config file
(differently/config.yaml in the user config folder, mode 0600). The current context
applies unless --context, DIFFERENTLY_CONTEXT, or the flags and environment variables of
the endpoint and token say otherwise.`,
	}
	var endpoint, tokenFile string
	var tokenStdin, use bool
	set := &cobra.Command{
		Use:   "set NAME",
		Short: "Create or change a context",
		Example: `  differently context set prod --url https://differently.example.com --token-stdin < token.txt
  differently context set ci --url http://10.0.0.5:8700 --token-file /run/secrets/differently --use`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, path, err := a.loadConfig()
			if err != nil {
				return err
			}
			if cfg.Contexts == nil {
				cfg.Contexts = map[string]contextConfig{}
			}
			c := cfg.Contexts[args[0]]
			if cmd.Flags().Changed("url") {
				c.Endpoint = endpoint
			}
			if tokenFile != "" {
				c.TokenFile, c.Token = tokenFile, ""
			}
			if tokenStdin {
				data, err := io.ReadAll(io.LimitReader(a.io.in, 64<<10))
				if err != nil {
					return err
				}
				tok := strings.TrimSpace(string(data))
				if tok == "" || strings.ContainsAny(tok, "\r\n") {
					return usagef("--token-stdin: stdin must hold one token on one line")
				}
				c.Token, c.TokenFile = tok, ""
			}
			cfg.Contexts[args[0]] = c
			if use || cfg.CurrentContext == "" {
				cfg.CurrentContext = args[0]
			}
			if err := saveConfig(path, cfg); err != nil {
				return err
			}
			a.progress("context %s saved in %s", args[0], path)
			return nil
		},
	}
	// Not --endpoint: that is the global flag, which would also aim this very command.
	set.Flags().StringVar(&endpoint, "url", "", "the daemon's `URL`")
	// set's own --token-file shadows the global one on purpose: the file is stored,
	// not read for this command.
	set.Flags().StringVar(&tokenFile, "token-file", "", "read the token from this `file` at every use")
	set.Flags().BoolVar(&tokenStdin, "token-stdin", false, "store the token read from stdin in the config file")
	set.Flags().BoolVar(&use, "use", false, "make it the current context")

	use_ := &cobra.Command{
		Use:               "use NAME",
		Short:             "Make a context the current one",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeContexts,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, path, err := a.loadConfig()
			if err != nil {
				return err
			}
			if _, ok := cfg.Contexts[args[0]]; !ok {
				return usagef("no context %q in %s", args[0], path)
			}
			cfg.CurrentContext = args[0]
			return saveConfig(path, cfg)
		},
	}
	rm := &cobra.Command{
		Use:               "rm NAME",
		Short:             "Remove a context",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeContexts,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, path, err := a.loadConfig()
			if err != nil {
				return err
			}
			if _, ok := cfg.Contexts[args[0]]; !ok {
				return usagef("no context %q in %s", args[0], path)
			}
			delete(cfg.Contexts, args[0])
			if cfg.CurrentContext == args[0] {
				cfg.CurrentContext = ""
			}
			return saveConfig(path, cfg)
		},
	}
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the contexts (never their tokens)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := a.loadConfig()
			if err != nil {
				return err
			}
			type row struct {
				Name     string `json:"name"`
				Current  bool   `json:"current"`
				Endpoint string `json:"endpoint,omitempty"`
				Token    string `json:"token"`
			}
			var rows []row
			for _, name := range sortedKeys(cfg.Contexts) {
				c := cfg.Contexts[name]
				tok := "none"
				switch {
				case c.Token != "":
					tok = "stored"
				case c.TokenFile != "":
					tok = "file " + c.TokenFile
				}
				rows = append(rows, row{name, name == cfg.CurrentContext, c.Endpoint, tok})
			}
			t := a.table("CURRENT", "NAME", "ENDPOINT", "TOKEN")
			for _, r := range rows {
				cur := ""
				if r.Current {
					cur = "*"
				}
				t.row(cur, r.Name, r.Endpoint, r.Token)
				t.id(r.Name)
			}
			return a.emit(orEmpty(rows), t)
		},
	}
	show := &cobra.Command{
		Use:   "show",
		Short: "Say which daemon and token the commands would use, and why (never the token)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, err := a.resolve()
			if err != nil {
				return err
			}
			v := map[string]string{"endpoint": conn.endpoint, "endpointFrom": conn.endpointFrom, "tokenFrom": conn.tokenFrom}
			if conn.tokenFrom == "" {
				v["tokenFrom"] = "none"
			}
			t := a.table("ENDPOINT", "FROM", "TOKEN FROM")
			t.row(conn.endpoint, conn.endpointFrom, v["tokenFrom"])
			return a.emit(v, t)
		},
	}
	cmd.AddCommand(set, use_, rm, ls, show)
	return cmd
}

func (a *app) completeContexts(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	cfg, _, err := a.loadConfig()
	if err != nil || len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return sortedKeys(cfg.Contexts), cobra.ShellCompDirectiveNoFileComp
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
