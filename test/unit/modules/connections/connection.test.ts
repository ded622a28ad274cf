import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { present, project, storedStrategies } from '../../../../src/modules/connections/connection.ts';

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

  it('project: listed members kept, or dropped with include_fields=false; an empty list keeps all', () => {
    assert.deepEqual(project(github, 'id, name,unknown', undefined), { id: github.id, name: 'github' });
    assert.deepEqual(project(github, 'id,name', true), { id: github.id, name: 'github' });
    assert.deepEqual(Object.keys(project(github, 'options,realms', false)), [
      'id',
      'strategy',
      'name',
      'is_domain_connection',
    ]);
    assert.equal(project(github, '', false), github);
    assert.equal(project(github, ' , ', true), github);
    assert.equal(project(github, undefined, undefined), github);
  });

  it("storedStrategies: `auth0` is the original's word for the own database", () => {
    assert.deepEqual(storedStrategies(['auth0']), ['svc']);
    assert.deepEqual(storedStrategies(['auth0', 'svc', 'github']), ['svc', 'github']);
    assert.deepEqual(storedStrategies([]), []);
  });
});
