import type { FastifyInstance } from 'fastify';
import type { Services } from '../../services.ts';
import { CaptchaResponse, UpdateCaptchaBody, type UpdateCaptchaInput } from './schema.ts';

export async function captchaRoutes(app: FastifyInstance, services: Pick<Services, 'captcha'>): Promise<void> {
  app.get(
    '/api/v2/attack-protection/captcha',
    {
      config: { scopes: ['read:attack_protection'] },
      schema: {
        tags: ['attack-protection'],
        operationId: 'getAttackProtectionCaptcha',
        summary: 'Get the CAPTCHA configuration',
        response: { 200: CaptchaResponse },
      },
    },
    async (request) => services.captcha.get(request.tenant.id),
  );

  app.patch<{ Body: UpdateCaptchaInput }>(
    '/api/v2/attack-protection/captcha',
    {
      config: { scopes: ['update:attack_protection'] },
      schema: {
        tags: ['attack-protection'],
        operationId: 'updateAttackProtectionCaptcha',
        summary: 'Update the CAPTCHA configuration (partial; secrets are write-only)',
        body: UpdateCaptchaBody,
        response: { 200: CaptchaResponse },
      },
    },
    async (request) => services.captcha.update(request.tenant.id, request.body),
  );
}
