// What E2B's API has and Differently's front door does not serve: the SDK must say
// so (a SandboxError with status 501 and the reason), not report the sandbox or the
// template missing, as it would for a 404 (docs/e2b.md, "What differs").
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Sandbox, SandboxError, SandboxNotFoundError } from 'e2b'
import { testTimeout, withSandbox } from './env.mjs'

function unserved(what) {
  return (err) => {
    assert.ok(err instanceof SandboxError, `${err} is not a SandboxError`)
    assert.ok(!(err instanceof SandboxNotFoundError), `${err} says the sandbox is missing`)
    assert.equal(err.statusCode, 501, `${err}`)
    assert.match(err.message, what)
    return true
  }
}

test('metrics and network updates answer not served', testTimeout, async () => {
  await withSandbox({}, async (sbx) => {
    await assert.rejects(sbx.getMetrics(), unserved(/metrics/))
    await assert.rejects(Sandbox.getMetrics(sbx.sandboxId), unserved(/metrics/))
    await assert.rejects(sbx.updateNetwork({ denyOut: ['0.0.0.0/0'] }), unserved(/network/))
    // The sandbox is untouched.
    assert.equal(await sbx.isRunning(), true)
  })
})

