import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseFields, project } from '../../../src/http/projection.ts';
import { present } from '../../../src/modules/connections/connection.ts';

describe('fields / include_fields projection', () => {
  it('keeps the listed members, drops them with include=false, and keeps all for an empty list', () => {
    const user = { user_id: 'svc|abc', email: 'a@example.com', name: 'A' };
    assert.deepEqual(project(user, ['user_id', 'email'], true), { user_id: 'svc|abc', email: 'a@example.com' });
    assert.deepEqual(project(user, ['email'], false), { user_id: 'svc|abc', name: 'A' });
    assert.equal(project(user, [], true), user);
    assert.deepEqual(parseFields(' user_id, ,email '), ['user_id', 'email']);
    assert.deepEqual(parseFields(undefined), []);
  });

  it('on a connection: listed members kept, or dropped with include_fields=false; an empty list keeps all', () => {
    const github = present({ id: 'con_0123456789abcdef', name: 'github', strategy: 'github' });
    assert.deepEqual(project(github, parseFields('id, name,unknown'), true), { id: github.id, name: 'github' });
    assert.deepEqual(project(github, parseFields('id,name'), true), { id: github.id, name: 'github' });
    assert.deepEqual(Object.keys(project(github, parseFields('options,realms'), false)), [
      'id',
      'strategy',
      'name',
      'is_domain_connection',
    ]);
    assert.equal(project(github, parseFields(''), false), github);
    assert.equal(project(github, parseFields(' , '), true), github);
    assert.equal(project(github, parseFields(undefined), true), github);
  });
});
