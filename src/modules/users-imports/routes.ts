import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import busboy from 'busboy';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError, closingConnection, usersImportErrors } from '../../http/errors.ts';
import { coerceFormBody, validationError, validatorCompiler } from '../../http/validation.ts';
import type { Services } from '../../services.ts';
import type { ReceivedFile } from './service.ts';
import { UsersImportBody, UsersImportCreated, UsersImportFields } from './schema.ts';

const tags = ['jobs'];
/** Form members are short: an id, two flags, an external id. */
const MAX_FIELD_BYTES = 1024;

/**
 * POST /jobs/users-imports. The multipart body is read here as it streams (busboy, bounded in parts,
 * field sizes and file size): the users file goes to the database in chunks as it arrives, never whole
 * in memory. The content-type parser that hands the raw stream over exists only in this scope, so no
 * other route accepts multipart bodies.
 */
export async function usersImportRoutes(app: FastifyInstance, services: Pick<Services, 'usersImports'>): Promise<void> {
  await app.register(async (scope) => {
    scope.addContentTypeParser('multipart/form-data', (_request, payload, done) => done(null, payload));
    scope.post(
      '/api/v2/jobs/users-imports',
      {
        config: { scopes: ['create:users'] },
        schema: {
          tags,
          operationId: 'createUsersImportJob',
          consumes: ['multipart/form-data'],
          body: UsersImportBody,
          response: { 201: UsersImportCreated },
          summary: 'Import users from a file into a database connection, in a background job',
          description: `The file is a JSON array of users (or NDJSON), at most USERS_IMPORT_MAX_BYTES (${services.usersImports.maxBytes} bytes here).`,
        },
        // The body is the raw multipart stream: its members are checked as they are read, below.
        validatorCompiler: ({ schema, httpPart }) =>
          httpPart === 'body' ? () => true : validatorCompiler({ schema, httpPart }),
      },
      async (request, reply) => {
        let release: () => void;
        try {
          release = await services.usersImports.reserveUpload(request.tenant.id);
        } catch (error) {
          throw error instanceof ApiError ? closingConnection(error) : error;
        }
        try {
          const { file, fields } = await readMultipart(request, services);
          try {
            const coerced = coerceFormBody(UsersImportFields, fields) as UsersImportFields;
            const validate = validatorCompiler({ schema: UsersImportFields, httpPart: 'body' });
            if (!validate(coerced)) throw validationError(validate.errors ?? [], 'body');
            return reply.code(201).send(await services.usersImports.create(request.tenant.id, file, coerced));
          } catch (error) {
            await services.usersImports.discard(file.jobId);
            throw error;
          }
        } finally {
          release();
        }
      },
    );
  });
}

/**
 * Reads the multipart body: the `users` file stored through the service, the other members collected.
 * Any refusal removes what the file had stored; a refusal before the body was read whole closes the
 * connection, so the rest of the upload is not read for nothing.
 */
async function readMultipart(
  request: FastifyRequest,
  services: Pick<Services, 'usersImports'>,
): Promise<{ file: ReceivedFile; fields: Record<string, string> }> {
  const contentType = request.headers['content-type'] ?? '';
  if (!/^multipart\/form-data\b/i.test(contentType)) throw usersImportErrors.notMultipart();
  const body = request.body as Readable;
  let parser: busboy.Busboy;
  try {
    parser = busboy({
      headers: request.headers,
      limits: {
        files: 1,
        fields: Object.keys(UsersImportFields.properties).length,
        parts: Object.keys(UsersImportFields.properties).length + 1,
        fieldSize: MAX_FIELD_BYTES,
        // One byte over the limit is read, so the service sees the file is too large.
        fileSize: services.usersImports.maxBytes + 1,
        headerPairs: 20,
      },
    });
  } catch (error) {
    throw usersImportErrors.malformedMultipart((error as Error).message);
  }
  const fields: Record<string, string> = {};
  let fileStream: Readable | undefined;
  let receiving: Promise<ReceivedFile> | undefined;
  let refusal: ApiError | undefined;
  const refuse = (error: ApiError) => {
    refusal ??= error;
  };
  const finished = new Promise<void>((resolve) => {
    parser.on('file', (name, stream) => {
      if (name !== 'users' || receiving) {
        refuse(
          name === 'users'
            ? usersImportErrors.unexpectedPart('users (a second file)')
            : usersImportErrors.unexpectedPart(name),
        );
        stream.resume();
        return;
      }
      fileStream = stream;
      receiving = services.usersImports.receive(stream);
      // Settled below; a refusal stops reading the rest of the body.
      receiving.catch(() => {
        body.unpipe(parser);
        body.resume();
        resolve();
      });
    });
    parser.on('field', (name, value, info) => {
      if (!Object.hasOwn(UsersImportFields.properties, name)) refuse(usersImportErrors.unexpectedPart(name));
      else if (info.valueTruncated)
        refuse(usersImportErrors.malformedMultipart(`${name} is longer than ${MAX_FIELD_BYTES} bytes`));
      else fields[name] = value;
    });
    for (const limit of ['partsLimit', 'filesLimit', 'fieldsLimit'] as const)
      parser.on(limit, () =>
        refuse(usersImportErrors.malformedMultipart('it has more parts than the operation takes')),
      );
    parser.on('error', (error: Error) => {
      refuse(usersImportErrors.malformedMultipart(error.message));
      resolve();
    });
    parser.on('close', () => resolve());
    body.on('error', (error: Error) => {
      refuse(usersImportErrors.malformedMultipart(error.message));
      resolve();
    });
    // A client gone mid-upload: what was stored is removed, and the request ends here rather than
    // waiting for a body that will never come (holding its place among the tenant's uploads).
    body.on('close', () => {
      if ((body as IncomingMessage).complete) return;
      refuse(usersImportErrors.malformedMultipart('the connection closed before the body ended'));
      fileStream?.destroy(new Error('the upload was cut off'));
      resolve();
    });
  });
  body.pipe(parser);
  await finished;
  let file: ReceivedFile | undefined;
  try {
    file = await receiving;
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    refuse(error);
  }
  if (refusal) {
    if (file) await services.usersImports.discard(file.jobId);
    throw withConnectionClose(refusal, request);
  }
  if (!file) throw usersImportErrors.missingFile();
  return { file, fields };
}

/** A refusal sent before the request body was read whole: the connection closes after it. */
function withConnectionClose(error: ApiError, request: FastifyRequest): ApiError {
  return request.raw.readableEnded ? error : closingConnection(error);
}
