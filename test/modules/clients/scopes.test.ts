import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { migrate, openDatabase, type Database } from '../../../src/db/database.ts';
import { ClientService } from '../../../src/modules/clients/service.ts';
import { ClientStore } from '../../../src/modules/clients/store.ts';
import { createTestDatabase, eachDatabase, type TestDatabase } from '../../helpers/databases.ts';

/**
 * A client's scope list is parsed once per stored text and shared (a grant of an admin client parsed
 * 4 KB of JSON every time), while every authentication still reads the client's row: a changed list
 * counts at the next grant.
 */
describe('client scopes read at each authentication', () => {
  eachDatabase((kind) => {
    let testDatabase: TestDatabase;
    let database: Database;
    let clients: ClientService;

    before(async () => {
      testDatabase = await createTestDatabase(kind);
      database = openDatabase({ databaseUrl: testDatabase.databaseUrl, dataDir: testDatabase.dataDir });
      await migrate(database);
      await database.db
        .insertInto('tenants')
        .values({ id: 't1', domain: 't1.test', created_at: new Date().toISOString() })
        .execute();
      clients = new ClientService(new ClientStore(database));
    });

    after(async () => {
      await database.close();
      await testDatabase.drop();
    });

    it('shares one frozen list while the stored list is unchanged, and reads a changed one at once', async () => {
      const created = await clients.create('t1', { name: 'ci', scopes: ['read:users', 'create:users'] });
      const first = await clients.authenticate('t1', created.clientId, created.clientSecret);
      const second = await clients.authenticate('t1', created.clientId, created.clientSecret);
      assert.deepEqual(first?.scopes, ['read:users', 'create:users']);
      assert.equal(second?.scopes, first?.scopes, 'the same list, not parsed again');
      assert.ok(Object.isFrozen(first!.scopes), 'shared, so never changed in place');
      assert.throws(() => (first!.scopes as string[]).push('delete:users'));

      await database.db
        .updateTable('clients')
        .set({ scopes: JSON.stringify(['read:users']) })
        .where('client_id', '=', created.clientId)
        .execute();
      const narrowed = await clients.authenticate('t1', created.clientId, created.clientSecret);
      assert.deepEqual(narrowed?.scopes, ['read:users'], 'the changed list, at the next authentication');
      assert.deepEqual(first!.scopes, ['read:users', 'create:users']);
    });
  });
});
