// Snapshots and forks through the SDK: E2B's snapshots are Differently's disk
// snapshots, a snapshot's ID is a template to create sandboxes from, and a fork is
// Differently's (docs/e2b.md).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Sandbox } from 'e2b'
import { testTimeout, withSandbox } from './env.mjs'

async function listAll(opts) {
  const paginator = Sandbox.listSnapshots(opts)
  const ids = []
  while (paginator.hasNext) {
    for (const info of await paginator.nextItems()) ids.push(info.snapshotId)
  }
  return ids
}

test('a snapshot is listed, starts a sandbox with its files, and is deleted', testTimeout, async () => {
  await withSandbox({}, async (sbx) => {
    await sbx.files.write('kept.txt', 'from before the snapshot')
    const snap = await sbx.createSnapshot()
    assert.match(snap.snapshotId, /^snap_/)
    assert.deepEqual(snap.names, [])
    try {
      const again = await sbx.createSnapshot()
      assert.deepEqual(await listAll({ sandboxId: sbx.sandboxId, limit: 1 }), [snap.snapshotId, again.snapshotId])
      assert.deepEqual(await sbx.listSnapshots().nextItems(), [snap, again])

      const restored = await Sandbox.create(snap.snapshotId, { timeoutMs: 300_000, requestTimeoutMs: 30_000 })
      try {
        assert.equal((await restored.getInfo()).templateId, snap.snapshotId)
        assert.equal(await restored.files.read('kept.txt'), 'from before the snapshot')
      } finally {
        await Sandbox.kill(restored.sandboxId).catch(() => {})
      }
      assert.equal(await Sandbox.deleteSnapshot(again.snapshotId), true)
    } finally {
      await Sandbox.deleteSnapshot(snap.snapshotId)
    }
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false)
    // Listing needs the sandbox: Differently lists snapshots by sandbox.
    await assert.rejects(Sandbox.listSnapshots().nextItems(), /sandboxID is required/)
  })
})

test('fork copies a sandbox with its files and metadata', testTimeout, async () => {
  await withSandbox({ metadata: { purpose: 'fork' } }, async (sbx) => {
    await sbx.files.write('forked.txt', 'from the source')
    const forks = await sbx.fork({ timeoutMs: 120_000 })
    assert.equal(forks.length, 1)
    const [child] = forks
    assert.ok(!(child instanceof Error), `${child}`)
    try {
      assert.notEqual(child.sandboxId, sbx.sandboxId)
      const info = await child.getInfo()
      assert.equal(info.metadata.purpose, 'fork')
      assert.equal(await child.files.read('forked.txt'), 'from the source')
    } finally {
      await Sandbox.kill(child.sandboxId).catch(() => {})
    }
  })
})
