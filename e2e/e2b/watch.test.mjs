// Directory watches through the SDK: sandbox.files.watchDir, which the daemon serves
// by polling the directory (docs/e2b.md says what polling can and cannot tell).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { FileType, FilesystemEventType, NotFoundError } from 'e2b'
import { needs, testTimeout, withSandbox } from './env.mjs'

// events collects a watch's events and lets a test wait for one it expects.
function events() {
  const seen = []
  const waiting = []
  return {
    onEvent(ev) {
      seen.push(ev)
      for (const w of waiting.splice(0)) {
        const i = seen.findIndex(w.match)
        if (i >= 0) w.resolve(seen.splice(i, 1)[0])
        else waiting.push(w)
      }
    },
    next(type, name) {
      const match = (ev) => ev.type === type && ev.name === name
      const i = seen.findIndex(match)
      if (i >= 0) return Promise.resolve(seen.splice(i, 1)[0])
      return new Promise((resolve) => waiting.push({ match, resolve }))
    },
  }
}

// watching runs fn with a recursive watch of dir, with entries, and its events;
// the watch must not have ended by itself.
async function watching(sbx, dir, fn) {
  const evs = events()
  const exited = []
  const handle = await sbx.files.watchDir(dir, (ev) => evs.onEvent(ev), {
    recursive: true,
    includeEntry: true,
    onExit: (err) => exited.push(err),
  })
  try {
    await fn(evs)
  } finally {
    await handle.stop()
  }
  assert.deepEqual(exited.filter(Boolean), [])
}

test('watchDir tells creates and writes', testTimeout, async () => {
  await withSandbox({}, async (sbx) => {
    await sbx.files.write('watched/keep.txt', 'kept')
    await watching(sbx, 'watched', async (evs) => {
      await sbx.files.write('watched/a.txt', 'one')
      const created = await evs.next(FilesystemEventType.CREATE, 'a.txt')
      assert.equal(created.entry?.type, FileType.FILE)
      assert.ok(created.entry.path.endsWith('watched/a.txt'), created.entry.path)

      await sbx.files.write('watched/a.txt', 'one and two')
      const written = await evs.next(FilesystemEventType.WRITE, 'a.txt')
      assert.equal(written.entry?.size, 11)

      // Recursive: a file in a new subdirectory is named by its path under the
      // watched one.
      await sbx.files.write('watched/sub/b.txt', 'b')
      await evs.next(FilesystemEventType.CREATE, 'sub')
      await evs.next(FilesystemEventType.CREATE, 'sub/b.txt')
    })
  })
})

test('watchDir tells renames and removes', needs('exec'), async () => {
  await withSandbox({}, async (sbx) => {
    await sbx.files.makeDir('watched')
    await sbx.files.write('watched/a.txt', 'one')
    await watching(sbx, 'watched', async (evs) => {
      await sbx.files.rename('watched/a.txt', 'watched/sub/b.txt')
      await evs.next(FilesystemEventType.RENAME, 'a.txt')
      const moved = await evs.next(FilesystemEventType.CREATE, 'sub/b.txt')
      assert.ok(moved.entry.path.startsWith('/') && moved.entry.path.endsWith('/watched/sub/b.txt'), moved.entry.path)

      await sbx.files.remove('watched/sub/b.txt')
      const removed = await evs.next(FilesystemEventType.REMOVE, 'sub/b.txt')
      assert.equal(removed.entry, undefined)
    })
  })
})

test('watchDir of a missing directory is not found', testTimeout, async () => {
  await withSandbox({}, async (sbx) => {
    await assert.rejects(sbx.files.watchDir('no-such-dir', () => {}), NotFoundError)
  })
})
