package api

// Limits enforced at every boundary that takes input. They are part of the contract:
// an adapter or client may rely on a peer never sending more.
const (
	// MaxJSONBodyBytes bounds every JSON request body (4 MiB).
	MaxJSONBodyBytes = 4 << 20
	// MaxFileBytes bounds one file read or written through the API or protocol (100 MiB).
	MaxFileBytes = 100 << 20
	// MaxStreamLineBytes bounds one NDJSON line, or one frame's payload, of a streamed
	// exec (8 MiB).
	MaxStreamLineBytes = 8 << 20
	// MaxExecOutputBytes bounds each of stdout and stderr in a synchronous ExecResult
	// (1 MiB each). Output beyond it is dropped and ExecResult.Truncated is set; use a
	// streamed exec for more.
	MaxExecOutputBytes = 1 << 20
	// MaxExecTimeoutSeconds is the longest timeoutSeconds an exec may ask for (2 h).
	MaxExecTimeoutSeconds = 2 * 60 * 60
)
