import assert from 'node:assert/strict';
import { Duplex } from 'node:stream';
import { describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { clientErrorHandler } from '../../../src/http/error-handler.ts';

const fastify = { log: { debug: () => undefined } } as unknown as FastifyInstance;

/** A socket that records what is written to it, with `inFlight` as the response it is carrying. */
function socketWith(inFlight: { headersSent: boolean } | null) {
  const written: string[] = [];
  const socket = new Duplex({
    read() {},
    write(chunk: Buffer, _encoding, callback) {
      written.push(chunk.toString());
      callback();
    },
  });
  Object.assign(socket, { _httpMessage: inFlight });
  return { socket, written };
}

const malformed = Object.assign(new Error('Parse Error'), { code: 'HPE_INVALID_METHOD', reason: 'Invalid method' });

describe('requests the HTTP parser refuses', () => {
  it('are answered in the API error shape, and the connection closed', () => {
    for (const inFlight of [null, { headersSent: false }]) {
      const { socket, written } = socketWith(inFlight);
      clientErrorHandler.call(fastify, malformed, socket);
      assert.match(written.join(''), /^HTTP\/1\.1 400 Bad Request\r\n[\s\S]*"errorCode":"invalid_request"/);
      assert.ok(socket.destroyed);
    }
  });

  it('write nothing into a response already begun on the connection (a pipelined request), only close it', () => {
    const { socket, written } = socketWith({ headersSent: true });
    clientErrorHandler.call(fastify, malformed, socket);
    assert.deepEqual(written, []);
    assert.ok(socket.destroyed);
  });
});
