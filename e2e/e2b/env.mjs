// What every test needs from its environment: where the daemon's E2B front door is,
// the project key, and the template to start. The Go driver
// (cmd/differently-server/e2b_sdk_test.go) sets them; a run by hand sets them too.
import { randomBytes } from 'node:crypto'
import { Sandbox } from 'e2b'

function required(name) {
  const v = process.env[name]
  if (!v) {
    throw new Error(`${name} is not set; run these tests through the Go driver or set it yourself`)
  }
  return v
}

// The SDK reads E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY itself; they are checked
// here so that a missing one fails with its name rather than with a request to e2b.app.
export const apiUrl = required('E2B_API_URL')
export const sandboxUrl = required('E2B_SANDBOX_URL')
export const apiKey = required('E2B_API_KEY')
export const template = required('E2B_TEST_TEMPLATE')

// Each test bounds itself, so that one that hangs fails alone.
export const testTimeout = { timeout: 120_000 }

// What the pool under test can do beyond creating, listing, timing out and killing
// sandboxes and moving whole files, as the Go driver says (E2B_TEST_FEATURES,
// comma-separated): "exec", commands run in a POSIX shell (which envd's makeDir,
// rename and remove, and relative paths, rest on); "stdin", input to a running
// command (exec.stdin); "pty", terminals; "pause", pause and resume.
export const features = new Set((process.env.E2B_TEST_FEATURES ?? '').split(',').filter(Boolean))

// needs is the options of a test that needs features: skipped, saying which, on a
// pool without them.
export function needs(...wanted) {
  const missing = wanted.filter((f) => !features.has(f))
  return { ...testTimeout, skip: missing.length > 0 ? `the pool under test lacks ${missing.join(', ')}` : false }
}

// run is this process's tag in metadata, so that list filters see only its sandboxes
// even when several runs share a daemon.
export const run = randomBytes(6).toString('hex')

// A sandbox that outlives a failed kill ends on its own within this.
const sandboxTimeoutMs = 300_000

export function create(opts = {}) {
  return Sandbox.create(template, {
    timeoutMs: sandboxTimeoutMs,
    requestTimeoutMs: 30_000,
    ...opts,
    metadata: { run, ...opts.metadata },
  })
}

// withSandbox creates a sandbox, passes it to fn and kills it however fn ends.
export async function withSandbox(opts, fn) {
  const sbx = await create(opts)
  try {
    return await fn(sbx)
  } finally {
    await Sandbox.kill(sbx.sandboxId).catch(() => {})
  }
}
