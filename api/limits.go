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

	// MaxTTLSeconds is the longest lifetime a sandbox, a profile or the policy's
	// defaults.ttlSeconds may ask for: ten years of 366 days. A longer one would
	// overflow the expiry's arithmetic (time.Duration counts nanoseconds in an int64),
	// and a sandbox meant to live for ever asks for 0, no expiry.
	MaxTTLSeconds = 10 * 366 * 24 * 60 * 60
	// MaxTemplateBytes bounds a sandbox's or profile's template name.
	MaxTemplateBytes = 1024
	// MaxRegionBytes bounds each region a placement names.
	MaxRegionBytes = 255
	// MaxInitCommands and MaxInitCommandBytes bound the init commands a create
	// records: the daemon keeps them with the sandbox and returns them on every read.
	MaxInitCommands     = 100
	MaxInitCommandBytes = 65536
)

// Bounds on the resources one sandbox (or a profile) may ask for, far above any one
// machine's. They keep every sum of them exact and within an int64 or a float64:
// even a million sandboxes at the maximum request a total that a quota, a usage
// figure and the databases' sums all hold without overflowing.
const (
	// MaxCPU is the most vCPUs one sandbox may ask for.
	MaxCPU = 1024
	// MaxMemoryMiB is the most memory one sandbox may ask for: 16 TiB, in MiB.
	MaxMemoryMiB = 16 << 20
	// MaxDiskGiB is the most disk one sandbox may ask for: 1 PiB, in GiB.
	MaxDiskGiB = 1 << 20
)

// Bounds on a project's quota: room for MaxQuotaSandboxes sandboxes at the maximum
// size each.
const (
	MaxQuotaSandboxes = 1_000_000
	MaxQuotaCPU       = MaxCPU * MaxQuotaSandboxes
	MaxQuotaMemoryMiB = MaxMemoryMiB * MaxQuotaSandboxes
	MaxQuotaDiskGiB   = MaxDiskGiB * MaxQuotaSandboxes
)
