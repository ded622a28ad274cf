import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { loadConfig } from '../../src/config.ts';
import { migrate, openDatabase, type Database } from '../../src/db/database.ts';

/**
 * Another process writes to the SQLite file while this one is inside a transaction, as a CLI command
 * (users import, a certificate upload) does beside a running server. The writer is a child process with
 * its own connection and the server's busy timeout.
 */
function writeFromAnotherProcess(
  file: string,
  id: string,
): { started: Promise<void>; exited: Promise<{ code: number | null; stderr: string }> } {
  const script = `
    const Database = require('better-sqlite3');
    const db = new Database(process.argv[1]);
    db.pragma('busy_timeout = 5000');
    process.stdout.write('started\\n');
    db.prepare("INSERT INTO tenants (id, domain, created_at) VALUES (?, ?, '2026-01-01T00:00:00.000Z')").run(process.argv[2], process.argv[2] + '.example');
    db.close();`;
  const child = spawn(process.execPath, ['-e', script, file, id], {
    cwd: process.cwd(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const started = new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
  const exited = new Promise<{ code: number | null; stderr: string }>((resolve) =>
    child.on('exit', (code) => resolve({ code, stderr })),
  );
  return { started, exited };
}

describe('SQLite shared with another process', () => {
  let dataDir: string;
  let database: Database;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-test-'));
    database = await openDatabase({ databaseUrl: undefined, dataDir });
    await migrate(database);
  });

  after(async () => {
    await database.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('runs a transaction that reads, then writes, while another process writes: both commit, one after the other', async () => {
    let other: ReturnType<typeof writeFromAnotherProcess> | undefined;
    await database.db.transaction().execute(async (trx) => {
      const before = await trx.selectFrom('tenants').select('id').execute();
      other = writeFromAnotherProcess(path.join(dataDir, 'tenantry.sqlite'), 'other-process');
      await other.started;
      // Time for the other process's write to land, if this transaction let it in before its own.
      await new Promise((resolve) => setTimeout(resolve, 500));
      await trx
        .insertInto('tenants')
        .values({ id: 'this-process', domain: 'this.example', created_at: new Date().toISOString() })
        .execute();
      assert.equal(before.length, (await trx.selectFrom('tenants').select('id').execute()).length - 1);
    });
    const exited = await other!.exited;
    assert.equal(exited.code, 0, exited.stderr);
    const ids = (await database.db.selectFrom('tenants').select('id').orderBy('id').execute()).map((t) => t.id);
    assert.deepEqual(
      ids.filter((id) => id.endsWith('-process')),
      ['other-process', 'this-process'],
    );
  });
});

describe('SQLite durability', () => {
  /** `synchronous` of a database opened under `env`: 2 is FULL, 1 NORMAL. */
  const synchronous = async (env: Record<string, string>) => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-test-'));
    const database = openDatabase(loadConfig({ DATA_DIR: dataDir, ...env }));
    try {
      return database.sqlite!.pragma('synchronous', { simple: true });
    } finally {
      await database.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  };

  it('syncs every commit to disk before acknowledging it, unless SQLITE_SYNCHRONOUS=normal trades that for speed', async () => {
    assert.equal(await synchronous({}), 2, 'FULL by default: a commit survives power loss');
    assert.equal(await synchronous({ SQLITE_SYNCHRONOUS: 'full' }), 2);
    assert.equal(await synchronous({ SQLITE_SYNCHRONOUS: 'normal' }), 1);
    assert.throws(
      () => loadConfig({ SQLITE_SYNCHRONOUS: 'off' }),
      /SQLITE_SYNCHRONOUS must be full or normal, got "off"/,
    );
  });
});

describe("SQLite's write-ahead log on disk", () => {
  it('is cut back to 64 MiB once a reader that let it grow past that has ended', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-test-'));
    const database = openDatabase({ dataDir, sqliteSynchronous: 'normal' });
    const file = path.join(dataDir, 'tenantry.sqlite');
    const walMiB = () => fs.statSync(`${file}-wal`).size / (1024 * 1024);
    try {
      const sqlite = database.sqlite!;
      sqlite.exec('CREATE TABLE filler (bytes BLOB)');
      const insert = sqlite.prepare('INSERT INTO filler VALUES (randomblob(3000))');
      // Rows of 3 KB, about a page each.
      const write = sqlite.transaction((rows: number) => {
        for (let i = 0; i < rows; i++) insert.run();
      });
      // A second connection's read keeps the log from being checkpointed past its snapshot.
      const reader = new BetterSqlite3(file);
      try {
        reader.exec('BEGIN');
        reader.prepare('SELECT count(*) FROM filler').get();
        for (let i = 0; i < 24; i++) write(1000);
        assert.ok(walMiB() > 64, `the log grew behind the reader: ${walMiB().toFixed(1)} MiB`);
      } finally {
        reader.close();
      }
      // The next commit checkpoints the whole log; the one after starts it over, cut back to the limit.
      write(1);
      write(1);
      assert.ok(walMiB() <= 64, `the log was cut back: ${walMiB().toFixed(1)} MiB`);
    } finally {
      await database.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
