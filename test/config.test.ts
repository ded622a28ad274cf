import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../src/config.ts';
import { runCli } from './helpers/cli.ts';

describe('configuration', () => {
  it('refuses a BOOTSTRAP_CLIENT_SECRET shorter than 32 characters, saying why', () => {
    assert.throws(
      () => loadConfig({ BOOTSTRAP_CLIENT_SECRET: 'a'.repeat(31) }),
      (error: Error) =>
        error instanceof ConfigError &&
        /BOOTSTRAP_CLIENT_SECRET must be at least 32 characters/.test(error.message) &&
        !error.message.includes('a'.repeat(31)),
    );
    assert.equal(loadConfig({ BOOTSTRAP_CLIENT_SECRET: 'a'.repeat(32) }).bootstrapClientSecret, 'a'.repeat(32));
    assert.equal(loadConfig({}).bootstrapClientSecret, undefined);
  });

  it('refuses to start with a short BOOTSTRAP_CLIENT_SECRET, and creates nothing', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-config-'));
    try {
      const run = await runCli(
        { PATH: process.env.PATH ?? '', DATA_DIR: dataDir, PORT: '0', BOOTSTRAP_CLIENT_SECRET: 'letmein' },
        ['serve'],
      );
      assert.notEqual(run.code, 0);
      assert.match(run.stderr, /BOOTSTRAP_CLIENT_SECRET must be at least 32 characters/);
      assert.ok(!`${run.stdout}${run.stderr}`.includes('letmein'));
      assert.deepEqual(fs.readdirSync(dataDir), []);
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('reads METRICS_PORT as off when unset, and refuses the API port or a non-port', () => {
    assert.equal(loadConfig({}).metricsPort, undefined);
    assert.equal(loadConfig({ METRICS_PORT: '' }).metricsPort, undefined);
    assert.equal(loadConfig({ METRICS_PORT: '9100' }).metricsPort, 9100);
    assert.equal(loadConfig({ PORT: '0', METRICS_PORT: '0' }).metricsPort, 0);
    for (const bad of [{ METRICS_PORT: '8080' }, { METRICS_PORT: '70000' }, { METRICS_PORT: 'nine' }])
      assert.throws(() => loadConfig(bad), ConfigError, JSON.stringify(bad));
  });

  it('reads TRUST_PROXY as off, on, a hop count or a list of proxy addresses', () => {
    assert.equal(loadConfig({}).trustProxy, false);
    assert.equal(loadConfig({ TRUST_PROXY: 'false' }).trustProxy, false);
    assert.equal(loadConfig({ TRUST_PROXY: 'true' }).trustProxy, true);
    assert.equal(loadConfig({ TRUST_PROXY: '2' }).trustProxy, 2);
    assert.equal(loadConfig({ TRUST_PROXY: '10.0.0.0/8, ::1,192.0.2.4' }).trustProxy, '10.0.0.0/8,::1,192.0.2.4');
    for (const bad of ['proxy.example', '10.0.0.0/33', '10.0.0.1/8/1', 'yes']) {
      assert.throws(() => loadConfig({ TRUST_PROXY: bad }), ConfigError, bad);
    }
  });

  it('reads integer settings as digits only, within their bounds', () => {
    assert.equal(loadConfig({ EVENT_STREAM_DELETION_CHUNK_ROWS: '100000' }).eventStreamDeletionChunkRows, 100_000);
    for (const bad of ['0', '-5', 'abc', '1.5', '1e3', '0x10', ' 7', '100001', '99999999999999999999999'])
      assert.throws(
        () => loadConfig({ EVENT_STREAM_DELETION_CHUNK_ROWS: bad }),
        /EVENT_STREAM_DELETION_CHUNK_ROWS must be an integer >= 1 and <= 100000/,
        bad,
      );
    assert.equal(loadConfig({}).eventStreamRedeliveryChunkRows, 2000);
    assert.equal(loadConfig({ DATABASE_URL: 'postgres://db.test/x' }).eventStreamRedeliveryChunkRows, 10_000);
    assert.equal(loadConfig({ EVENT_STREAM_REDELIVERY_CHUNK_ROWS: '1' }).eventStreamRedeliveryChunkRows, 1);
    assert.equal(loadConfig({}).eventStreamRedeliveryLanes, 1);
    assert.equal(loadConfig({ DATABASE_URL: 'postgres://db.test/x' }).eventStreamRedeliveryLanes, 2);
    assert.equal(loadConfig({ EVENT_STREAM_REDELIVERY_LANES: '4' }).eventStreamRedeliveryLanes, 4);
    for (const bad of ['0', '5', '1.5', 'two'])
      assert.throws(
        () => loadConfig({ EVENT_STREAM_REDELIVERY_LANES: bad }),
        /EVENT_STREAM_REDELIVERY_LANES must be an integer >= 1 and <= 4/,
      );
    for (const bad of ['0', '1e3', '100001'])
      assert.throws(
        () => loadConfig({ EVENT_STREAM_REDELIVERY_CHUNK_ROWS: bad }),
        /EVENT_STREAM_REDELIVERY_CHUNK_ROWS must be an integer >= 1 and <= 100000/,
        bad,
      );
    assert.throws(
      () => loadConfig({ EVENT_STREAMS_MAX: '1e2' }),
      /EVENT_STREAMS_MAX must be an integer >= 0, got "1e2"/,
    );
  });

  it('reads RATE_LIMIT_REDIS_FAILURE as allow (the default), deny or local', () => {
    assert.equal(loadConfig({}).rateLimitRedisFailure, 'allow');
    for (const value of ['allow', 'deny', 'local'] as const) {
      assert.equal(loadConfig({ RATE_LIMIT_REDIS_FAILURE: value }).rateLimitRedisFailure, value);
    }
    assert.throws(() => loadConfig({ RATE_LIMIT_REDIS_FAILURE: 'open' }), /must be allow, deny or local, got "open"/);
  });
});
