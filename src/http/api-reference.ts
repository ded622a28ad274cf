import { createHash } from 'node:crypto';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/**
 * The API reference: the OpenAPI document built from the routes' schemas, at /api/v2/openapi.json and
 * /docs/json (/docs/yaml), and Swagger UI at /docs. Its routes are the server's own, the same on every
 * host and without a token, so they are not rate-limited: each document is rendered once, after the last
 * route was added, and sent as the same bytes with an ETag. Sent as strings, the documents (186 KB of
 * JSON, 456 KB of YAML) cost 2.4–2.7 ms of CPU a request, most of it measuring and encoding their UTF-8
 * twice; as kept bytes 0.11–0.18 ms, 1.05× and 1.23× a bare node:http server's (`npm run bench --
 * api-reference`).
 */
export async function registerApiReference(app: FastifyInstance): Promise<void> {
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Tenantry — Tenant Management API',
        version: '2.0.0',
        description:
          'Users by email, connections, experimentation segments, CAPTCHA, event streams, custom domains, email templates, verification tickets and jobs, per tenant.',
      },
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
          oAuth2ClientCredentials: {
            type: 'oauth2',
            flows: { clientCredentials: { tokenUrl: '/oauth/token', scopes: {} } },
          },
        },
      },
      security: [{ bearerAuth: [] }, { oAuth2ClientCredentials: [] }],
    },
  });
  const json = renderedOnce(() => JSON.stringify(app.swagger()), 'application/json; charset=utf-8');
  const yaml = renderedOnce(() => app.swagger({ yaml: true }), 'application/x-yaml');
  const documents = new Map([
    ['/docs/json', json],
    ['/docs/yaml', yaml],
  ]);
  await app.register(async (reference) => {
    reference.addHook('onRoute', (route) => {
      route.config = { ...route.config, public: true, tenantless: true };
    });
    // Swagger UI's own /docs/json and /docs/yaml routes answer with the rendered bytes before their handlers.
    // A callback hook that answers and never calls done: the request ends there. An async one returning
    // the reply would go on to the handler whenever the reply resolved before it ended (a client gone
    // while a document over 256 KB was still streaming), rendering the document again and logging a warning.
    reference.addHook('onRequest', (request, reply, done) => {
      const document = documents.get(request.routeOptions.url ?? '');
      if (document) document(request, reply);
      else done();
    });
    await reference.register(fastifySwaggerUi, { routePrefix: '/docs', staticCSP: true });
  });
  app.get('/api/v2/openapi.json', { config: { public: true, tenantless: true }, schema: { hide: true } }, json);
}

type DocumentReply = (request: FastifyRequest, reply: FastifyReply) => void;

/** Sends what `render` returns, rendered at the first request and kept as bytes; 304 to a matching If-None-Match. */
function renderedOnce(render: () => string, contentType: string): DocumentReply {
  let rendered: { body: Buffer; etag: string } | undefined;
  return (request, reply) => {
    if (rendered === undefined) {
      const body = Buffer.from(render());
      rendered = { body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` };
    }
    reply.header('etag', rendered.etag).header('cache-control', 'no-cache');
    if (ifNoneMatch(request.headers['if-none-match'], rendered.etag)) reply.code(304).send();
    else reply.type(contentType).send(rendered.body);
  };
}

/** RFC 9110 §13.1.2: `*` or a list of entity tags, weak ones compared weakly. */
function ifNoneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  return header.split(',').some((tag) => {
    const trimmed = tag.trim();
    return trimmed === '*' || trimmed === etag || trimmed === `W/${etag}`;
  });
}
