// Files through the SDK: text and binary round trips and directory listings.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { FileType } from 'e2b'
import { needs, testTimeout, withSandbox } from './env.mjs'

test('a text file round-trips and commands see it', needs('exec'), async () => {
  await withSandbox({}, async (sbx) => {
    const text = 'hello\nwörld\n'
    const info = await sbx.files.write('notes/hello.txt', text)
    assert.equal(info.name, 'hello.txt')
    assert.ok(info.path.startsWith('/'), `${info.path} is not absolute`)
    assert.ok(info.path.endsWith('/notes/hello.txt'), info.path)
    assert.equal(await sbx.files.read('notes/hello.txt'), text)
    assert.equal(await sbx.files.read(info.path), text)
    const result = await sbx.commands.run(`cat '${info.path}'`)
    assert.equal(result.stdout, text)
  })
})

test('a binary file round-trips byte for byte', testTimeout, async () => {
  await withSandbox({}, async (sbx) => {
    const bytes = new Uint8Array(3 * 256 + 17)
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7) % 256
    await sbx.files.write('blob.bin', bytes.buffer)
    const read = await sbx.files.read('blob.bin', { format: 'bytes' })
    assert.ok(read instanceof Uint8Array)
    assert.deepEqual(Buffer.from(read), Buffer.from(bytes))
  })
})

test('list shows files and directories; exists tells a missing path', needs('exec'), async () => {
  await withSandbox({}, async (sbx) => {
    await sbx.files.write('tree/a.txt', 'a')
    await sbx.files.write('tree/sub/b.txt', 'bb')
    const entries = await sbx.files.list('tree')
    const byName = Object.fromEntries(entries.map((e) => [e.name, e]))
    assert.deepEqual(Object.keys(byName).sort(), ['a.txt', 'sub'])
    assert.equal(byName['a.txt'].type, FileType.FILE)
    assert.equal(byName['a.txt'].size, 1)
    assert.equal(byName.sub.type, FileType.DIR)
    // Paths are absolute, as E2B's envd answers them.
    assert.ok(byName['a.txt'].path.startsWith('/') && byName['a.txt'].path.endsWith('/tree/a.txt'), byName['a.txt'].path)
    assert.equal(await sbx.files.exists('tree/a.txt'), true)
    assert.equal(await sbx.files.exists('tree/missing.txt'), false)
  })
})
