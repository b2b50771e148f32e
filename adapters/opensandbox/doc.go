// Package opensandbox is the adapter for a self-hosted OpenSandbox server: sandboxes
// are managed through its lifecycle API and commands and files go through execd, the
// daemon OpenSandbox runs inside every sandbox.
//
// The adapter follows the published API descriptions plus the wire details recorded
// beside them (the OPEN-SANDBOX-API-KEY header, the doubly encoded metadata filter,
// execd's bare JSON event stream). Each sandbox is stamped with the metadata
// differently-sandbox-id and differently-installation: Create looks the first up
// before creating (idempotency) and List filters by the second, reading every page
// and failing as a whole if any page fails.
//
// Pool config keys (see docs/providers/opensandbox.md for what each does):
//
//	apiURL          lifecycle API root with its /v1 prefix (required)
//	image           image for requests without a template, and behind templateId
//	templateId      the one template this pool serves; other templates are refused
//	isolation       container (default) or microvm; reported, not checked
//	runtime         docker (pause/resume, no diskGiB) or kubernetes (stop/start); empty: neither
//	features        extra declared features: arch.amd64, arch.arm64, snapshots.memory
//	useServerProxy  reach execd through {apiURL}/sandboxes/{id}/proxy/44772
//	lineEndings     lf (default), crlf or raw: how execd's output lines are rejoined
//	egress          public (default), none or allowlist
//	egressAllow     domains allowed with egress: allowlist
//	ports           none (default) or signed: ports.expose with signed URLs
//	portScheme      http (default) or https, for endpoints reported without a scheme
//	portURLSeconds  lifetime of a signed port URL (default 3600)
//
// Exec wraps the request in one bash line for execd: arguments are single-quoted so
// no shell interprets them, a command runs under /bin/sh -c, stdin is uploaded to a
// temporary file that the line opens and unlinks before the command starts, and a
// trailing newline on both streams lets the adapter rebuild output exactly from
// execd's terminator-less lines.
package opensandbox
