// Commands through the SDK: streamed output, exit codes, environment, working
// directory and background processes.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { CommandExitError } from 'e2b'
import { features, needs, withSandbox } from './env.mjs'

test('output arrives through onStdout and in the result', needs('exec'), async () => {
  await withSandbox({}, async (sbx) => {
    const chunks = []
    const result = await sbx.commands.run('for i in 1 2 3; do echo line$i; done', {
      onStdout: (data) => chunks.push(data),
    })
    assert.equal(result.exitCode, 0)
    assert.equal(result.stdout, 'line1\nline2\nline3\n')
    assert.equal(chunks.join(''), result.stdout)
  })
})

test('a failing command rejects with its exit code and stderr', needs('exec'), async () => {
  await withSandbox({}, async (sbx) => {
    const stderr = []
    await assert.rejects(
      sbx.commands.run('echo out; echo oops >&2; exit 7', { onStderr: (data) => stderr.push(data) }),
      (err) => {
        assert.ok(err instanceof CommandExitError, `${err} is not a CommandExitError`)
        assert.equal(err.exitCode, 7)
        assert.equal(err.stdout, 'out\n')
        assert.equal(err.stderr, 'oops\n')
        return true
      },
    )
    assert.equal(stderr.join(''), 'oops\n')
  })
})

test('envs and cwd reach the command', needs('exec'), async () => {
  await withSandbox({ envs: { FROM_CREATE: 'sandbox-wide' } }, async (sbx) => {
    const marker = await sbx.files.write('cwd-test/marker.txt', 'here')
    const dir = marker.path.slice(0, marker.path.lastIndexOf('/'))
    const result = await sbx.commands.run('echo "$FROM_CREATE $FROM_RUN"; cat marker.txt', {
      envs: { FROM_RUN: 'per-command' },
      cwd: dir,
    })
    assert.equal(result.stdout, 'sandbox-wide per-command\nhere')
  })
})

test('a background command runs until killed', needs('exec'), async () => {
  await withSandbox({}, async (sbx) => {
    let started
    const startedOutput = new Promise((resolve) => (started = resolve))
    const handle = await sbx.commands.run('echo started; exec sleep 600', {
      background: true,
      onStdout: (data) => {
        if (data.includes('started')) started()
      },
    })
    assert.ok(handle.pid > 0, `pid ${handle.pid}`)
    await startedOutput
    assert.equal(handle.exitCode, undefined, 'the command ended before it was killed')
    assert.equal(await handle.kill(), true)
    await assert.rejects(handle.wait(), (err) => {
      assert.ok(err instanceof CommandExitError, `${err} is not a CommandExitError`)
      assert.notEqual(err.exitCode, 0)
      return true
    })
  })
})

test('stdin is fed while the command runs, and closed', needs('exec', 'stdin'), async () => {
  await withSandbox({}, async (sbx) => {
    const seen = []
    let gotOne
    const one = new Promise((resolve) => (gotOne = resolve))
    const handle = await sbx.commands.run('while read l; do echo "got $l"; done; echo bye', {
      background: true,
      stdin: true,
      onStdout: (data) => {
        seen.push(data)
        if (seen.join('').includes('got one\n')) gotOne()
      },
    })
    await sbx.commands.sendStdin(handle.pid, 'one\n')
    await one // the command answered before the next line was sent
    await handle.sendStdin('two\n')
    await handle.closeStdin()
    const result = await handle.wait()
    assert.equal(result.exitCode, 0)
    assert.equal(result.stdout, 'got one\ngot two\nbye\n')
  })
})

test('stdin on a pool that cannot feed it is refused, naming the pool', { ...needs(), skip: features.has('stdin') ? 'the pool under test feeds stdin' : false }, async () => {
  await withSandbox({}, async (sbx) => {
    await assert.rejects(sbx.commands.run('cat', { background: true, stdin: true }), (err) => {
      assert.match(err.message, /feeding stdin to a running command is not supported by pool \S+/)
      return true
    })
  })
})

test('a terminal: bash on a pty takes keys, resizes and exits', needs('exec', 'pty'), async () => {
  await withSandbox({}, async (sbx) => {
    const decoder = new TextDecoder()
    let out = ''
    const waiters = []
    const waitFor = (text) =>
      new Promise((resolve) => {
        waiters.push({ text, resolve })
        check()
      })
    const check = () => {
      for (const w of waiters.splice(0)) {
        if (out.includes(w.text)) w.resolve()
        else waiters.push(w)
      }
    }
    const term = await sbx.pty.create({
      cols: 100,
      rows: 30,
      onData: (data) => {
        out += decoder.decode(data, { stream: true })
        check()
      },
    })
    assert.ok(term.pid > 0, `pid ${term.pid}`)
    const enc = new TextEncoder()
    await sbx.pty.sendInput(term.pid, enc.encode('echo "size $(stty size) ans=$((6*7))"\n'))
    await waitFor('size 30 100 ans=42')
    await sbx.pty.resize(term.pid, { cols: 120, rows: 40 })
    await sbx.pty.sendInput(term.pid, enc.encode('echo "now $(stty size)"; exit 3\n'))
    await waitFor('now 40 120')
    await assert.rejects(term.wait(), (err) => {
      assert.equal(err.exitCode, 3)
      return true
    })
  })
})

test('a terminal on a pool without one is refused, naming the pool', { ...needs(), skip: features.has('pty') ? 'the pool under test has terminals' : false }, async () => {
  await withSandbox({}, async (sbx) => {
    await assert.rejects(sbx.pty.create({ cols: 80, rows: 24, onData: () => {} }), (err) => {
      assert.match(err.message, /a terminal \(pty\) is not supported by pool \S+/)
      return true
    })
  })
})
