import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { present, storedStrategies } from '../../../../src/modules/connections/connection.ts';

const github = present({ id: 'con_0123456789abcdef', name: 'github', strategy: 'github' });

describe('connection records', () => {
  it("present the original's members, in its order, realm = name, nothing of the configuration", () => {
    assert.deepEqual(Object.entries(github), [
      ['id', 'con_0123456789abcdef'],
      ['options', {}],
      ['strategy', 'github'],
      ['name', 'github'],
      ['is_domain_connection', false],
      ['realms', ['github']],
    ]);
  });

  it("storedStrategies: `auth0` is the original's word for the own database", () => {
    assert.deepEqual(storedStrategies(['auth0']), ['svc']);
    assert.deepEqual(storedStrategies(['auth0', 'svc', 'github']), ['svc', 'github']);
    assert.deepEqual(storedStrategies([]), []);
  });
});
