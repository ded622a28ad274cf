import Fastify, { type FastifyHttpsOptions, type FastifyInstance } from 'fastify';
import type { SecureContextOptions } from 'node:tls';
import { badRequest } from './http/errors.ts';
import { registerApiReference } from './http/api-reference.ts';
import { parseJsonBody } from './http/json-body.ts';
import { registerConsole } from './http/console.ts';
import { clientErrorHandler, frameworkErrorHandler, registerErrorHandling } from './http/error-handler.ts';
import { AccessLog, requestLoggerFactory } from './http/access-log.ts';
import { registerRequestPipeline } from './http/hooks.ts';
import { requestTimeouts } from './http/request-timeouts.ts';
import { dropStalledResponses } from './http/stalled-responses.ts';
import { registerFormBodySupport, validatorCompiler } from './http/validation.ts';
import { ping } from './db/database.ts';
import { newId } from './ids.ts';
import { captchaRoutes } from './modules/captcha/routes.ts';
import { connectionRoutes } from './modules/connections/routes.ts';
import { eventStreamRoutes } from './modules/event-streams/routes.ts';
import { customDomainRoutes } from './modules/custom-domains/routes.ts';
import { emailRoutes } from './modules/emails/routes.ts';
import { emailTemplateRoutes } from './modules/email-templates/routes.ts';
import { jobRoutes } from './modules/email-verification/jobs/routes.ts';
import { ticketRoutes } from './modules/email-verification/tickets/routes.ts';
import { oauthRoutes } from './modules/oauth/routes.ts';
import { segmentRoutes } from './modules/segments/routes.ts';
import { userRoutes } from './modules/users/routes.ts';
import { usersImportRoutes } from './modules/users-imports/routes.ts';
import { snapshotRoutes } from './snapshots/routes.ts';
import type { Services } from './services.ts';

/** Each area's routes, registered in this order. */
const modules: ReadonlyArray<(app: FastifyInstance, services: Services) => Promise<void>> = [
  oauthRoutes,
  userRoutes,
  connectionRoutes,
  segmentRoutes,
  captchaRoutes,
  eventStreamRoutes,
  customDomainRoutes,
  emailTemplateRoutes,
  emailRoutes,
  ticketRoutes,
  jobRoutes,
  usersImportRoutes,
  snapshotRoutes,
];

/** Longest path parameter routed; longer ones are refused with 414. */
const MAX_PARAM_LENGTH = 512;

export interface AppOptions {
  /** PEM certificate and key: the server speaks HTTPS, with them as the default certificate (custom domains get theirs by SNI). */
  https?: SecureContextOptions;
}

export async function buildApp(services: Services, options: AppOptions = {}): Promise<FastifyInstance> {
  const { config } = services;
  const timeouts = requestTimeouts(config.requestTimeoutMs);
  const app = Fastify({
    // Silent means no logger at all, rather than a per-request child logger that writes nothing.
    ...(config.logLevel === 'silent'
      ? { logger: false }
      : {
          loggerInstance: services.logger,
          logController: new AccessLog(services.logger),
          childLoggerFactory: requestLoggerFactory(),
        }),
    ...(options.https
      ? {
          https: {
            ...options.https,
            ...timeouts,
            // A connection that has not finished its handshake is let go as one that sent no whole request
            // (see stalled-responses.ts); Node's own limit is 120 s, a slow client's way to hold sockets.
            handshakeTimeout: config.responseStallTimeoutMs,
            SNICallback: services.customDomainCertificates.sniCallback,
          } as FastifyHttpsOptions<never>['https'],
        }
      : { http: timeouts }),
    requestTimeout: timeouts.requestTimeout,
    bodyLimit: config.bodyLimitBytes,
    // request.ip, which anonymous rate limits count by, believes X-Forwarded-For only from these proxies.
    trustProxy: config.trustProxy as boolean | string,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors: frameworkErrorHandler(MAX_PARAM_LENGTH),
    clientErrorHandler,
    requestIdHeader: 'x-request-id',
    genReqId: () => newId.requestId(),
    forceCloseConnections: 'idle',
    return503OnClosing: true,
  }) as unknown as FastifyInstance;

  dropStalledResponses(app, config.responseStallTimeoutMs, services.logger);
  app.setValidatorCompiler(validatorCompiler);
  // Responses are written with JSON.stringify: response schemas document the API; they never drop members.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));

  // Bodies are JSON or form-encoded, as the original accepts; anything else is a 415.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    if (body === '') return done(null, undefined);
    const parsed = parseJsonBody(body as string);
    if (!('refused' in parsed)) return done(null, parsed.value);
    done(parsed.refused === 'malformed' ? badRequest.malformedJson() : badRequest.loneSurrogate(), undefined);
  });
  registerFormBodySupport(app);
  registerErrorHandling(app, config.bodyLimitBytes);
  registerRequestPipeline(app, services);

  await registerApiReference(app);

  // The console's page and assets, served like /docs: the same on every host, without a token.
  registerConsole(app);

  const serverOwn = { public: true, tenantless: true } as const;
  app.get('/health', { config: serverOwn, schema: { hide: true } }, async (_request, reply) => {
    try {
      await ping(services.database);
      return { status: 'ok' };
    } catch {
      return reply.code(503).send({ status: 'unavailable' });
    }
  });
  // Readiness, for load balancers and orchestrators: 503 while the database is unreachable or not
  // migrated, and from the start of shutdown (serve.ts drains before closing).
  app.get('/health/ready', { config: serverOwn, schema: { hide: true } }, async (_request, reply) => {
    const state = await services.readiness.state();
    return reply.code(state === 'ready' ? 200 : 503).send({ status: state });
  });

  for (const register of modules) await register(app, services);
  await app.ready();
  return app;
}
