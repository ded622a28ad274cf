import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_TEMPLATES, mergeTemplate } from '../../../../src/modules/email-templates/template.ts';

const DEFAULT = DEFAULT_TEMPLATES.verify_email;

describe('mergeTemplate', () => {
  it('replaces the members given and keeps the others', () => {
    const merged = mergeTemplate(DEFAULT, { subject: 'Hi {{ user.name }}', urlLifetimeInSeconds: 60, enabled: false });
    assert.equal(merged.subject, 'Hi {{ user.name }}');
    assert.equal(merged.urlLifetimeInSeconds, 60);
    assert.equal(merged.enabled, false);
    assert.equal(merged.body, DEFAULT.body);
    assert.equal(merged.syntax, 'liquid');
  });

  it('restores the default of a member set to null, and omits optional members left unset', () => {
    const custom = mergeTemplate(DEFAULT, {
      subject: 'Custom',
      from: 'me@example.com',
      resultUrl: 'https://example.com/done',
    });
    const restored = mergeTemplate(custom, { subject: null, from: null });
    assert.equal(restored.subject, DEFAULT.subject);
    assert.equal('from' in restored, false);
    assert.equal(restored.resultUrl, 'https://example.com/done');
    assert.deepEqual(Object.keys(mergeTemplate(DEFAULT, {})), [
      'template',
      'body',
      'subject',
      'syntax',
      'includeEmailInRedirect',
      'enabled',
    ]);
  });
});
