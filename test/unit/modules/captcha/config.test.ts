import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { captchaConfig, providersToStore } from '../../../../src/modules/captcha/config.ts';

describe('providersToStore', () => {
  it('keeps each provider’s public members apart from its secret, in the fixed provider order', () => {
    const stored = providersToStore({
      arkose: { site_key: 'ark', secret: 'ark-secret', fail_open: true },
      recaptcha_enterprise: { site_key: 'rk', api_key: 'rk-key', project_id: 'p' },
      auth_challenge: { fail_open: true },
    });
    assert.deepEqual(stored, [
      { provider: 'auth_challenge', settings: { fail_open: true }, secret: undefined },
      { provider: 'recaptcha_enterprise', settings: { site_key: 'rk', project_id: 'p' }, secret: 'rk-key' },
      { provider: 'arkose', settings: { site_key: 'ark', fail_open: true }, secret: 'ark-secret' },
    ]);
  });

  it('stores nothing of simple_captcha, and nothing for providers not given', () => {
    assert.deepEqual(
      providersToStore({ simple_captcha: { anything: 1 } as never, active_provider_id: 'hcaptcha' }),
      [],
    );
  });
});

describe('captchaConfig', () => {
  it('answers the documented default for a tenant that stored nothing', () => {
    assert.deepEqual(captchaConfig({ activeProviderId: undefined, providers: [] }), {
      active_provider_id: 'auth_challenge',
      simple_captcha: {},
      auth_challenge: { fail_open: false },
    });
  });

  it('lists configured providers in the original’s order, whatever order they were stored in', () => {
    const config = captchaConfig({
      activeProviderId: 'hcaptcha',
      providers: [
        { provider: 'hcaptcha', settings: '{"site_key":"h"}' },
        { provider: 'recaptcha_v2', settings: '{"site_key":"r"}' },
        { provider: 'auth_challenge', settings: '{"fail_open":true}' },
      ],
    });
    assert.deepEqual(Object.keys(config), [
      'active_provider_id',
      'simple_captcha',
      'auth_challenge',
      'recaptcha_v2',
      'hcaptcha',
    ]);
    assert.deepEqual(config.auth_challenge, { fail_open: true });
    assert.equal(config.active_provider_id, 'hcaptcha');
  });
});
