import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BoundedCache, stringBytes } from '../../src/bounded-cache.ts';
import { migrate, now, openDatabase } from '../../src/db/database.ts';
import { TenantService } from '../../src/modules/tenants/service.ts';
import { TenantStore } from '../../src/modules/tenants/store.ts';

describe('BoundedCache', () => {
  it('drops the oldest entries once the entry bound is reached', () => {
    const cache = new BoundedCache<number>({ entries: 3, bytes: 1 << 20 });
    for (const key of ['a', 'b', 'c', 'd']) cache.set(key, key.charCodeAt(0));
    assert.equal(cache.size, 3);
    assert.equal(cache.get('a'), undefined);
    assert.deepEqual(
      ['b', 'c', 'd'].map((k) => cache.get(k)),
      [98, 99, 100],
    );
  });

  it('drops the oldest entries once the byte bound would be passed, charging keys and stated sizes', () => {
    const cache = new BoundedCache<string>({ entries: 1000, bytes: 4096 });
    const big = 'x'.repeat(1000); // 2,000 bytes as a key, plus the entry's overhead
    cache.set(`${big}1`, 'one');
    assert.ok(cache.chargedBytes > 2000 && cache.chargedBytes < 2200, String(cache.chargedBytes));
    cache.set(`${big}2`, 'two');
    assert.equal(cache.size, 1, 'two 2 KB keys do not fit in 4 KB');
    assert.equal(cache.get(`${big}2`), 'two');
    cache.set('small', 'value', 1000);
    assert.equal(cache.size, 2);
    assert.ok(cache.chargedBytes <= 4096);
  });

  it('replaces an entry in place of its old charge, and refuses one larger than the budget', () => {
    const cache = new BoundedCache<string>({ entries: 10, bytes: 1024 });
    cache.set('k', 'v1', 500);
    cache.set('k', 'v2', 100);
    assert.equal(cache.size, 1);
    assert.equal(cache.get('k'), 'v2');
    assert.ok(cache.chargedBytes < 300, String(cache.chargedBytes));
    cache.set('huge', 'v', 2048);
    assert.equal(cache.get('huge'), undefined);
    assert.equal(cache.get('k'), 'v2', 'an entry too large for the cache evicts nothing');
    cache.delete('k');
    assert.equal(cache.chargedBytes, 0);
    cache.set('a', 'v', 10);
    cache.clear();
    assert.equal(cache.size, 0);
    assert.equal(cache.chargedBytes, 0);
  });

  it('charges two bytes per UTF-16 unit, nothing for null', () => {
    assert.equal(stringBytes('abc'), 6);
    assert.equal(stringBytes(null), 0);
  });
});

describe('the tenant lookup by Host, flooded with distinct long Host headers', () => {
  it('holds at most its byte budget (4 MiB) of them, however many arrive', async () => {
    // A real (in-memory SQLite) database with two tenants: an unknown Host then names no tenant.
    const database = openDatabase({ dataDir: '', sqliteMemory: true });
    try {
      await migrate(database);
      const store = new TenantStore(database);
      for (const id of ['tenant-a', 'tenant-b']) {
        await store.insert({ id, domain: `${id}.example.test` }, now());
      }
      const tenants = new TenantService(store, { lookupHost: async () => undefined, readyDomains: async () => [] });
      // 2,000 distinct 8 KB Host headers: 32 MB of keys, were they all kept.
      const hosts = Array.from({ length: 2000 }, (_, i) => `${i}.${'h'.repeat(8 * 1024)}.example`);
      for (const host of hosts) assert.equal(await tenants.resolve(host), undefined);
      const cached = hosts.filter((host) => tenants.resolveCached(host) !== undefined).length;
      assert.ok(cached > 0 && cached <= (4 * 1024 * 1024) / (16 * 1024), `${cached} of 2,000 held`);
      // The newest are the ones kept.
      assert.notEqual(tenants.resolveCached(hosts.at(-1)), undefined);
      assert.equal(tenants.resolveCached(hosts[0]), undefined);
      // A tenant's own domain is found and cached beside them.
      assert.equal((await tenants.resolve('tenant-a.example.test'))?.tenant.id, 'tenant-a');
      assert.equal(tenants.resolveCached('tenant-a.example.test')?.found?.tenant.id, 'tenant-a');
    } finally {
      await database.close();
    }
  });
});
